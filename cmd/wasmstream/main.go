// Command wasmstream runs WebAssembly stream processors against Kafka.
//
// main is thin: every command is in doMain, which tests call with their own
// arguments, output streams and environment.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := doMain(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Environ())
	stop()
	os.Exit(code)
}
