// Command watch prints the hot-swap example's output as it is committed:
// each greeting with its partition and the plugin version that made it
// (the wasmstream-version header).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:19092", "Kafka seed brokers, comma-separated")
	topic := flag.String("topic", "greetings", "the topic to read")
	all := flag.Bool("all", false, "from the topic's start (default: only new greetings)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := kgo.NewOffset().AtEnd()
	if *all {
		start = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...), kgo.ConsumeTopics(*topic),
		kgo.ConsumeResetOffset(start), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "watch:", err)
		os.Exit(1)
	}
	defer cl.Close()
	fmt.Printf("%-9s %-6s %-22s %s\n", "partition", "offset", "wasmstream-version", "value")
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		fetches.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "watch: %s/%d: %v\n", t, p, err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			version := ""
			for _, h := range r.Headers {
				if h.Key == "wasmstream-version" {
					version = string(h.Value)
				}
			}
			fmt.Printf("%-9d %-6d %-22s %s\n", r.Partition, r.Offset, version, r.Value)
		})
	}
}
