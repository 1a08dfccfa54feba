// Command produce feeds the hot-swap example: it writes a name to the
// "names" topic every -every until interrupted, keyed by a sequence number
// so the names spread over every partition.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var names = []string{"ada", "alan", "barbara", "donald", "edsger", "grace", "john", "ken", "leslie", "margaret", "niklaus", "tony"}

func main() {
	brokers := flag.String("brokers", "127.0.0.1:19092", "Kafka seed brokers, comma-separated")
	topic := flag.String("topic", "names", "the topic to write to")
	every := flag.Duration("every", 200*time.Millisecond, "time between names")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...), kgo.DefaultProduceTopic(*topic))
	if err != nil {
		fmt.Fprintln(os.Stderr, "produce:", err)
		os.Exit(1)
	}
	defer cl.Close()
	fmt.Printf("writing a name to %s every %s; Ctrl-C stops\n", *topic, *every)
	tick := time.NewTicker(*every)
	defer tick.Stop()
	for n := 0; ; n++ {
		rec := &kgo.Record{Key: []byte(strconv.Itoa(n)), Value: []byte(names[n%len(names)])}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			if ctx.Err() != nil {
				fmt.Printf("wrote %d names\n", n)
				return
			}
			fmt.Fprintln(os.Stderr, "produce:", err)
			os.Exit(1)
		}
		select {
		case <-ctx.Done():
			fmt.Printf("wrote %d names\n", n+1)
			return
		case <-tick.C:
		}
	}
}
