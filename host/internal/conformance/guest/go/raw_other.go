//go:build !wasip1

package main

import "github.com/wasmstream/wasmstream/abi"

// The conformance processor runs only as Wasm (the suite builds it for
// wasip1); natively the raw host calls do not exist, and reaching one is a
// bug in whatever ran it.

func unreachable() int32 { panic("conformance: raw host calls exist only in a wasip1 build") }

func rawEmit([]byte) int32                                     { return unreachable() }
func rawEmitAt(uint32, uint32) int32                           { return unreachable() }
func rawOutputIndex(string) int32                              { return unreachable() }
func rawStoreIndex(string) int32                               { return unreachable() }
func rawLog(uint32, string) int32                              { return unreachable() }
func rawScanClose(uint32) int32                                { return unreachable() }
func rawStateGet(uint32, []byte, []byte) int32                 { return unreachable() }
func rawScanOpen(uint32, []byte, []byte) int32                 { return unreachable() }
func rawScanNext(uint32, []byte) int32                         { return unreachable() }
func rawTimerSetAt(abi.TimerKind, int64, uint32, uint32) int32 { return unreachable() }
func rawTimeNow(uint32) int64                                  { return int64(unreachable()) }
func rawTrap()                                                 { unreachable() }
