package host

import (
	"fmt"
	"slices"
	"strings"
)

// The config's choices are string types that parse themselves
// (encoding.TextUnmarshaler: a bad value in a file, the environment or a
// flag is refused where it is read, naming its field path) and that
// Validate checks again for a Config built in Go. Their zero value ("")
// is unset: ApplyDefaults gives it the default its field states.

// Guarantee is the processing guarantee of every processor of the app
// (Config.Guarantee).
type Guarantee string

const (
	ExactlyOnce Guarantee = "exactly_once"
	AtLeastOnce Guarantee = "at_least_once"
)

var guarantees = []Guarantee{ExactlyOnce, AtLeastOnce}

// UnmarshalText accepts exactly_once and at_least_once.
func (g *Guarantee) UnmarshalText(b []byte) error { return parseEnum(g, b, guarantees) }

// ErrorPolicy is what a failed record does (ProcessorConfig.OnError).
type ErrorPolicy string

const (
	OnErrorFail       ErrorPolicy = "fail"
	OnErrorSkip       ErrorPolicy = "skip"
	OnErrorDeadLetter ErrorPolicy = "dead_letter"
)

var errorPolicies = []ErrorPolicy{OnErrorFail, OnErrorSkip, OnErrorDeadLetter}

// UnmarshalText accepts fail, skip and dead_letter.
func (p *ErrorPolicy) UnmarshalText(b []byte) error { return parseEnum(p, b, errorPolicies) }

// StartOffset is where a partition with no committed offset starts
// (KafkaConfig.StartOffset).
type StartOffset string

const (
	StartEarliest StartOffset = "earliest"
	StartLatest   StartOffset = "latest"
)

var startOffsets = []StartOffset{StartEarliest, StartLatest}

// UnmarshalText accepts earliest and latest.
func (s *StartOffset) UnmarshalText(b []byte) error { return parseEnum(s, b, startOffsets) }

// GroupProtocol is the consumer group protocol (KafkaConfig.GroupProtocol).
type GroupProtocol string

const (
	ProtocolAuto     GroupProtocol = "auto"
	ProtocolConsumer GroupProtocol = "consumer"
	ProtocolClassic  GroupProtocol = "classic"
)

var groupProtocols = []GroupProtocol{ProtocolAuto, ProtocolConsumer, ProtocolClassic}

// UnmarshalText accepts auto, consumer and classic.
func (p *GroupProtocol) UnmarshalText(b []byte) error { return parseEnum(p, b, groupProtocols) }

// Members is how a process joins the consumer group (KafkaConfig.Members).
type Members string

const (
	MembersPerProcessor Members = "per_processor"
	MembersShared       Members = "shared"
)

var membersValues = []Members{MembersPerProcessor, MembersShared}

// UnmarshalText accepts per_processor and shared.
func (m *Members) UnmarshalText(b []byte) error { return parseEnum(m, b, membersValues) }

// LogLevel is the host's log level (LogConfig.Level), in any case.
type LogLevel string

const (
	LevelDebug LogLevel = "debug"
	LevelInfo  LogLevel = "info"
	LevelWarn  LogLevel = "warn"
	LevelError LogLevel = "error"
)

var logLevels = []LogLevel{LevelDebug, LevelInfo, LevelWarn, LevelError}

// UnmarshalText accepts debug, info, warn and error, in any case (kept
// lower-cased).
func (l *LogLevel) UnmarshalText(b []byte) error {
	return parseEnum(l, []byte(strings.ToLower(string(b))), logLevels)
}

// LogFormat is the host's log line format (LogConfig.Format).
type LogFormat string

const (
	LogText LogFormat = "text"
	LogJSON LogFormat = "json"
)

var logFormats = []LogFormat{LogText, LogJSON}

// UnmarshalText accepts text and json.
func (f *LogFormat) UnmarshalText(b []byte) error { return parseEnum(f, b, logFormats) }

// ExpiryClock is what a store's time to live is measured against
// (StoreExpiry.Clock).
type ExpiryClock string

const (
	ClockEvent ExpiryClock = "event"
	ClockWall  ExpiryClock = "wall"
)

var expiryClocks = []ExpiryClock{ClockEvent, ClockWall}

// UnmarshalText accepts event and wall.
func (c *ExpiryClock) UnmarshalText(b []byte) error { return parseEnum(c, b, expiryClocks) }

// OutputEmit is when an output's records are produced (OutputConfig.Emit).
type OutputEmit string

const (
	// EmitEach produces every record as it is emitted (the default).
	EmitEach OutputEmit = "each"
	// EmitLatestPerKey produces the last record of each key per commit
	// window, at its commit point.
	EmitLatestPerKey OutputEmit = "latest_per_key"
)

var outputEmits = []OutputEmit{EmitEach, EmitLatestPerKey}

// UnmarshalText accepts each and latest_per_key.
func (e *OutputEmit) UnmarshalText(b []byte) error { return parseEnum(e, b, outputEmits) }

// parseEnum sets *v to text when it is one of values or "" (unset).
func parseEnum[E ~string](v *E, text []byte, values []E) error {
	if problem := enumProblem(E(text), values); problem != "" {
		return fmt.Errorf("%s", problem)
	}
	*v = E(text)
	return nil
}

// enumProblem says what is wrong with v, "" when it is one of values or
// unset.
func enumProblem[E ~string](v E, values []E) string {
	if v == "" || slices.Contains(values, v) {
		return ""
	}
	names := make([]string, len(values))
	for i, n := range values {
		names[i] = string(n)
	}
	last := len(names) - 1
	return fmt.Sprintf("%q must be %s or %s", v, strings.Join(names[:last], ", "), names[last])
}
