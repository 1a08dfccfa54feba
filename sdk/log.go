package sdk

import "github.com/wasmstream/wasmstream/abi"

// Level is a log level, ordered like log/slog's.
type Level uint32

// Log levels.
const (
	LevelDebug = Level(abi.LogDebug)
	LevelInfo  = Level(abi.LogInfo)
	LevelWarn  = Level(abi.LogWarn)
	LevelError = Level(abi.LogError)
)

// Log writes msg to the host's log at level, tagged by the host with the
// processor's name. The host cuts messages at abi.MaxLogSize bytes. Logging
// never fails the record; a host error is ignored.
func Log(level Level, msg string) { hostLog(uint32(level), msg) }

// LogDebug is Log(LevelDebug, msg).
func LogDebug(msg string) { hostLog(abi.LogDebug, msg) }

// LogInfo is Log(LevelInfo, msg).
func LogInfo(msg string) { hostLog(abi.LogInfo, msg) }

// LogWarn is Log(LevelWarn, msg).
func LogWarn(msg string) { hostLog(abi.LogWarn, msg) }

// LogError is Log(LevelError, msg).
func LogError(msg string) { hostLog(abi.LogError, msg) }
