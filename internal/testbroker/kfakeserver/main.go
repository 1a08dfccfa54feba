// Command kfakeserver runs a kfake cluster (github.com/twmb/franz-go/pkg/kfake)
// as a process of its own, for tests that measure their own process's
// memory, goroutines or file descriptors (testbroker.OutOfProcess): an
// in-process kfake keeps every record it is sent in the test's heap.
//
// It listens on 127.0.0.1 (ports chosen by the system), prints
// "listening <addr>[,<addr>...]" on one line of stdout once it serves, and
// runs until its stdin ends (the test closed it, or died) or it gets
// SIGTERM or SIGINT. Each -broker-config key=value is a kfake broker
// config.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	os.Exit(doMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

type configs map[string]string

func (c configs) String() string { return fmt.Sprint(map[string]string(c)) }

func (c configs) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not key=value", s)
	}
	c[k] = v
	return nil
}

func doMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kfakeserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgs := configs{}
	fs.Var(cfgs, "broker-config", "a kfake broker config, key=value (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(cfgs))
	if err != nil {
		fmt.Fprintln(stderr, "kfakeserver:", err)
		return 1
	}
	defer c.Close()
	fmt.Fprintln(stdout, "listening", strings.Join(c.ListenAddrs(), ","))
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(done)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-done:
	case <-sig:
	}
	return 0
}
