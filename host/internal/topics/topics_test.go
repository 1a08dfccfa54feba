package topics

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/internal/testbroker"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// Without create, every missing input and output is named with what needs
// it; with create they are made, and so are the host's own topics: the
// changelog (compacted, one partition per input partition) and the
// dead-letter topic (as wide as the widest input).
func TestEnsure(t *testing.T) {
	b := testbroker.New(t)
	adm := kadm.NewClient(b.Client(t, kgo.MetadataMinAge(kclient.MetadataMinAge)))
	in, wide, out := b.Name(t, "in"), b.Name(t, "wide"), b.Name(t, "out")
	b.CreateTopic(t, in, 2, nil)
	b.CreateTopic(t, wide, 5, nil)
	changelog, dlq := b.Name(t, "app-counts-changelog"), b.Name(t, "app-proc-dlq")
	want := Want{
		Processors: []Processor{
			{Name: "counter", Inputs: []string{in}, Outputs: map[string]string{"out": out}, Changelogs: map[string]string{"counts": changelog}},
			{Name: "proc", Inputs: []string{wide}, DeadLetter: dlq},
		},
		Partitions: 3,
		Brokers:    strings.Join(b.Addrs(), ","),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Ensure(ctx, adm, want, discard)
	if err == nil || !strings.Contains(err.Error(), `topic "`+out+`" (output "out" of processor "counter") does not exist`) {
		t.Fatalf("Ensure without create = %v, want the missing output named", err)
	}
	want.Create = true
	if err := Ensure(ctx, adm, want, discard); err != nil {
		t.Fatal(err)
	}
	// Kafka's metadata learns of new topics a moment after CreateTopics
	// returns: ask until every topic is listed with partitions.
	for topic, n := range map[string]int32{out: 3, changelog: 2, dlq: 5} {
		got, err := existingPartitions(ctx, adm, topic)
		if err != nil || got != n {
			t.Errorf("%s has %d partitions (%v), want %d", topic, got, err, n)
		}
	}
	configs, err := describeConfigs(ctx, adm, changelog)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := configs.On(changelog, nil)
	if err != nil {
		t.Fatal(err)
	}
	compact := false
	for _, c := range rc.Configs {
		compact = compact || (c.Key == "cleanup.policy" && c.MaybeValue() == "compact")
	}
	if !compact {
		t.Errorf("changelog %s is not compacted: %+v", changelog, rc.Configs)
	}
	// Again: everything exists, nothing to do.
	if err := Ensure(ctx, adm, want, discard); err != nil {
		t.Fatalf("Ensure when all exist: %v", err)
	}
}

// Limits reads each topic's max.message.bytes and cleanup policy, and the
// broker default where a topic sets none.
func TestLimits(t *testing.T) {
	b := testbroker.New(t)
	small, compacted, plain := b.Name(t, "small"), b.Name(t, "compacted"), b.Name(t, "plain")
	b.CreateTopic(t, small, 1, map[string]string{"max.message.bytes": "2048"})
	b.CreateTopic(t, compacted, 1, map[string]string{"cleanup.policy": "compact"})
	b.CreateTopic(t, plain, 1, nil)
	stamped, appended := b.Name(t, "stamped"), b.Name(t, "appended")
	b.CreateTopic(t, stamped, 1, map[string]string{
		"message.timestamp.after.max.ms":  "60000",
		"message.timestamp.before.max.ms": "0",
	})
	b.CreateTopic(t, appended, 1, map[string]string{
		"message.timestamp.type":         "LogAppendTime",
		"message.timestamp.after.max.ms": "60000",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := Limits(ctx, b.Admin(t), small, compacted, plain, stamped, appended)
	if err != nil {
		t.Fatal(err)
	}
	if l := got[small]; l.MaxMessageBytes != 2048 || l.Compacted {
		t.Errorf("%s: %+v, want 2048 bytes, not compacted", small, l)
	}
	if l := got[compacted]; !l.Compacted || l.MaxMessageBytes <= 0 {
		t.Errorf("%s: %+v, want compacted", compacted, l)
	}
	if l := got[plain]; l.Compacted || l.MaxMessageBytes < 1000000 {
		t.Errorf("%s: %+v, want the broker default (about 1 MiB)", plain, l)
	}
	if l := got[stamped]; l.TimestampAfter != time.Minute || l.TimestampBefore != time.Millisecond {
		t.Errorf("%s: %+v, want a minute ahead and (0 ms taken as) 1 ms behind", stamped, l)
	}
	if l := got[appended]; l.TimestampAfter != 0 || l.TimestampBefore != 0 {
		t.Errorf("%s: %+v, want no timestamp limits (LogAppendTime)", appended, l)
	}
	if l := got[plain]; l.TimestampBefore != 0 {
		t.Errorf("%s: %+v, want no limit behind (Kafka's default is Long.MAX_VALUE)", plain, l)
	}
	if _, err := Limits(ctx, b.Admin(t), b.Name(t, "nosuch")); err == nil {
		t.Error("Limits of a missing topic succeeded")
	}
}

// A topic just created can be unknown to the broker that answers
// DescribeConfigs for a moment (seen on Kafka 4.1 right after the host
// created a repartition topic): Limits asks again instead of failing the
// start. Here the broker answers UNKNOWN_TOPIC_OR_PARTITION twice.
func TestLimitsWaitsForANewTopic(t *testing.T) {
	b := testbroker.New(t)
	b.RequireFake(t, "injects DescribeConfigs errors with kfake's control functions")
	topic := b.Name(t, "fresh")
	b.CreateTopic(t, topic, 1, map[string]string{"max.message.bytes": "4096"})
	var refused atomic.Int32
	b.Fake().ControlKey(int16(kmsg.DescribeConfigs), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if refused.Load() >= 2 {
			return nil, nil, false
		}
		b.Fake().KeepControl()
		refused.Add(1)
		dr := req.(*kmsg.DescribeConfigsRequest)
		resp := dr.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, r := range dr.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
			rr.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Resources = append(resp.Resources, rr)
		}
		return resp, nil, true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := Limits(ctx, b.Admin(t), topic)
	if err != nil {
		t.Fatalf("Limits after %d refusals: %v", refused.Load(), err)
	}
	if refused.Load() != 2 || got[topic].MaxMessageBytes != 4096 {
		t.Fatalf("refused %d times, limit %+v; want 2 refusals, then the topic's 4096 bytes", refused.Load(), got[topic])
	}
}
