package topictool

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

func newClient(t *testing.T, b *testbroker.Broker) *Client {
	t.Helper()
	c, err := New(kclient.Config{Brokers: b.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func consume(t *testing.T, c *Client, o ConsumeOptions) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := c.Consume(ctx(t), &b, o); err != nil {
		t.Fatalf("consume %+v: %v", o, err)
	}
	return b.String()
}

// Lines go in as records and come out as they went in, in every format,
// from where --from says.
func TestProduceConsume(t *testing.T) {
	b := testbroker.New(t)
	c := newClient(t, b)
	topic := b.Name(t, "t")
	b.CreateTopic(t, topic, 1, nil)

	in := "k1:v1\n\nk2:a:b\r\n:empty key\nk3:\n"
	res, err := c.Produce(ctx(t), strings.NewReader(in), ProduceOptions{Topic: topic, KeySep: ":", Partition: -1,
		Headers: []kgo.RecordHeader{{Key: "src", Value: []byte("test")}}})
	if err != nil || res.Records != 4 || res.ByPartition[0] != 4 {
		t.Fatalf("produce: %+v, %v", res, err)
	}
	want := `0/0 k1 v1 {src=test}
0/1 k2 a:b {src=test}
0/2 "" empty key {src=test}
0/3 k3 "" {src=test}
`
	if got := consume(t, c, ConsumeOptions{Topic: topic}); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
	if got := consume(t, c, ConsumeOptions{Topic: topic, Format: `%k -> %v (%p@%o %h)\n`}); got != "k1 -> v1 (0@0 src=test)\nk2 -> a:b (0@1 src=test)\n -> empty key (0@2 src=test)\nk3 ->  (0@3 src=test)\n" {
		t.Errorf("template:\n%s", got)
	}
	for from, want := range map[string]string{"start": "k1 k2  k3 ", "end": "", "2": " k3 ", "+1": "k2  k3 ", "-1": "k3 ", "99": "", "-99": "k1 k2  k3 "} {
		if got := consume(t, c, ConsumeOptions{Topic: topic, From: from, Format: `%k `}); got != want {
			t.Errorf("--from %s: %q, want %q", from, got, want)
		}
	}
	if got := consume(t, c, ConsumeOptions{Topic: topic, Max: 2, Format: `%k `}); got != "k1 k2 " {
		t.Errorf("-n 2: %q", got)
	}

	// json out, then in again: the same records.
	js := consume(t, c, ConsumeOptions{Topic: topic, Format: "json"})
	if !strings.Contains(js, `"key":"k1","value":"v1","headers":[{"key":"src","value":"test"}]`) {
		t.Errorf("json:\n%s", js)
	}
	copyTopic := b.Name(t, "copy")
	b.CreateTopic(t, copyTopic, 1, nil)
	if res, err := c.Produce(ctx(t), strings.NewReader(js), ProduceOptions{Topic: copyTopic, Format: "json", Partition: -1}); err != nil || res.Records != 4 {
		t.Fatalf("produce the json back: %+v, %v", res, err)
	}
	strip := func(s string) string { // the copy has its own topic and timestamps are kept
		return strings.ReplaceAll(s, copyTopic, topic)
	}
	if got := strip(consume(t, c, ConsumeOptions{Topic: copyTopic, Format: "json"})); got != js {
		t.Errorf("json round trip:\n%s\nwant:\n%s", got, js)
	}

	// A time: records at or after it.
	tt := b.Name(t, "time")
	b.CreateTopic(t, tt, 1, nil)
	lines := `{"key":"old","value":"1","timestamp":1000}
{"key":"new","value":"2","timestamp":"1970-01-01T00:00:05Z"}
`
	if _, err := c.Produce(ctx(t), strings.NewReader(lines), ProduceOptions{Topic: tt, Format: "json", Partition: -1}); err != nil {
		t.Fatal(err)
	}
	if got := consume(t, c, ConsumeOptions{Topic: tt, From: "@3000", Format: `%k %d %T\n`}); got != "new 5000 1970-01-01T00:00:05.000Z\n" {
		t.Errorf("--from @3000: %q", got)
	}
}

// murmur2 is Kafka's partitioning hash (org.apache.kafka.common.utils.
// Utils.murmur2), written out here so the test does not take franz-go's
// word for it.
func murmur2(data []byte) int32 {
	const seed, m, r = uint32(0x9747b28c), uint32(0x5bd1e995), 24
	h := seed ^ uint32(len(data))
	for len(data) >= 4 {
		k := binary.LittleEndian.Uint32(data)
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// A keyed record goes where Kafka's default partitioner puts it
// (toPositive(murmur2(key)) % partitions), which is where the host puts
// the records it writes; an explicit partition wins.
func TestProducePartitionsByKey(t *testing.T) {
	b := testbroker.New(t)
	c := newClient(t, b)
	topic := b.Name(t, "t")
	b.CreateTopic(t, topic, 5, nil)
	var in strings.Builder
	for i := range 200 {
		fmt.Fprintf(&in, "key-%d\t%d\n", i, i)
	}
	if _, err := c.Produce(ctx(t), strings.NewReader(in.String()), ProduceOptions{Topic: topic, KeySep: "\t", Partition: -1}); err != nil {
		t.Fatal(err)
	}
	out := consume(t, c, ConsumeOptions{Topic: topic, Format: `%p %k\n`})
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var p int32
		var key string
		if _, err := fmt.Sscanf(line, "%d %s", &p, &key); err != nil {
			t.Fatal(err)
		}
		if want := (murmur2([]byte(key)) & 0x7fffffff) % 5; p != want {
			t.Errorf("%s on partition %d, want %d", key, p, want)
		}
		n++
	}
	if n != 200 {
		t.Errorf("%d records", n)
	}
	if _, err := c.Produce(ctx(t), strings.NewReader("a\nb\n"), ProduceOptions{Topic: topic, Partition: 3}); err != nil {
		t.Fatal(err)
	}
	if got := consume(t, c, ConsumeOptions{Topic: topic, Partitions: []int32{3}, From: "-2", Format: `%p %v\n`}); got != "3 a\n3 b\n" {
		t.Errorf("--partition 3: %q", got)
	}
}

// Consume reads committed records only, and stops at the end of a
// partition that ends in an aborted transaction.
func TestConsumeReadCommitted(t *testing.T) {
	b := testbroker.New(t)
	c := newClient(t, b)
	topic := b.Name(t, "t")
	b.CreateTopic(t, topic, 1, nil)
	txn := b.Client(t, kgo.TransactionalID(b.Name(t, "txn")), kgo.DefaultProduceTopic(topic))
	for _, commit := range []bool{true, false} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		v := "committed"
		if !commit {
			v = "aborted"
		}
		if err := txn.ProduceSync(ctx(t), &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx(t), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if got := consume(t, c, ConsumeOptions{Topic: topic, Format: `%v\n`}); got != "committed\n" {
		t.Errorf("read_committed: %q", got)
	}
	if took := time.Since(start); took >= IdleStop {
		t.Errorf("took %v: it waited for a record at the end instead of seeing the abort marker", took)
	}
	if got := consume(t, c, ConsumeOptions{Topic: topic, Format: `%v\n`, ReadUncommitted: true}); got != "committed\naborted\n" {
		t.Errorf("read_uncommitted: %q", got)
	}
}

// --follow prints records produced after it started, until it is
// stopped.
func TestConsumeFollow(t *testing.T) {
	b := testbroker.New(t)
	c := newClient(t, b)
	topic := b.Name(t, "t")
	b.CreateTopic(t, topic, 2, nil)
	fctx, stop := context.WithCancel(ctx(t))
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		_, err := c.Consume(fctx, &out, ConsumeOptions{Topic: topic, Follow: true, From: "end", Format: `%v\n`})
		done <- err
	}()
	// A record produced before --follow reached the end is not printed:
	// produce until one is.
	testutil.Eventually(t, 30*time.Second, func() error {
		if s := out.String(); !strings.Contains(s, "late") {
			b.Produce(t, &kgo.Record{Topic: topic, Value: []byte("late")})
			return fmt.Errorf("--follow printed %q", s)
		}
		return nil
	})
	stop()
	if err := <-done; err != nil {
		t.Errorf("stopped --follow: %v", err)
	}
}

func TestCreateListDescribe(t *testing.T) {
	b := testbroker.New(t)
	c := newClient(t, b)
	topic := b.Name(t, "created")
	t.Cleanup(func() { _, _ = b.Admin(t).DeleteTopics(context.Background(), topic) })
	got, err := c.Create(ctx(t), CreateOptions{Topic: topic, Partitions: 2, Replicas: -1, Configs: map[string]string{"cleanup.policy": "compact"}})
	if err != nil || got.Partitions != 2 || got.Replicas != 1 {
		t.Fatalf("create: %+v, %v", got, err)
	}
	if _, err := c.Create(ctx(t), CreateOptions{Topic: topic, Partitions: 2, Replicas: -1}); err == nil || !strings.Contains(err.Error(), "already exists") || !strings.Contains(err.Error(), "(2 partitions)") {
		t.Errorf("create again: %v", err)
	}
	topics, err := c.List(ctx(t), false)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tp := range topics {
		found = found || tp == TopicSummary{Name: topic, Partitions: 2, Replicas: 1}
	}
	if !found {
		t.Errorf("list lacks %s: %+v", topic, topics)
	}
	if _, err := c.Produce(ctx(t), strings.NewReader("k:v\n"), ProduceOptions{Topic: topic, KeySep: ":", Partition: 1}); err != nil {
		t.Fatal(err)
	}
	var d bytes.Buffer
	if err := c.Describe(ctx(t), &d, topic); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"partitions  2", "PARTITION  LEADER", "cleanup.policy=compact"} {
		if !strings.Contains(d.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, d.String())
		}
	}
	if !strings.Contains(d.String(), "\n1          ") || !strings.Contains(strings.SplitN(d.String(), "\n1 ", 2)[1], " 0      1    1") {
		t.Errorf("describe does not show partition 1 with offsets 0 to 1:\n%s", d.String())
	}
}

// Mistakes are refused with what to do, and nothing after a bad line is
// produced.
func TestProduceErrors(t *testing.T) {
	b := testbroker.New(t)
	c := newClient(t, b)
	topic := b.Name(t, "t")
	b.CreateTopic(t, topic, 1, nil)
	for _, tc := range []struct {
		in   string
		o    ProduceOptions
		want string
	}{
		{"a:1\n", ProduceOptions{Topic: b.Name(t, "nope"), KeySep: ":", Partition: -1}, "does not exist on"},
		{"a:1\nno separator\nc:3\n", ProduceOptions{Topic: topic, KeySep: ":", Partition: -1}, `line 2: no key separator ":" in "no separator"`},
		{"{\"key\":1}\n", ProduceOptions{Topic: topic, Format: "json", Partition: -1}, "line 1: not a JSON record"},
		{"{\"value\":\"v\",\"extra\":1}\n", ProduceOptions{Topic: topic, Format: "json", Partition: -1}, `unknown field "extra"`},
		{"x\n", ProduceOptions{Topic: topic, Partition: 7}, "partition 7: topic " + topic + " has 1 partitions"},
	} {
		_, err := c.Produce(ctx(t), strings.NewReader(tc.in), tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("produce %q: %v; want %q", tc.in, err, tc.want)
		}
	}
	if got := consume(t, c, ConsumeOptions{Topic: topic, Format: `%k `}); got != "a " {
		t.Errorf("after the bad lines the topic holds %q; want only the line before the bad one", got)
	}
	if _, err := c.Consume(ctx(t), &bytes.Buffer{}, ConsumeOptions{Topic: b.Name(t, "nope")}); !errors.Is(err, ErrNoTopic) {
		t.Errorf("consume of a missing topic: %v", err)
	}
}

func TestParseJSONLine(t *testing.T) {
	r, err := ParseJSONLine([]byte(`{"key_base64":"AAE=","value":null,"headers":{"b":"2","a":null},"timestamp":"2025-01-02T15:04:05.5Z","partition":1,"topic":"x","offset":9}`))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Key, []byte{0, 1}) || r.Value != nil || r.Partition != 1 || r.Timestamp.UnixMilli() != 1735830245500 ||
		len(r.Headers) != 2 || r.Headers[0].Key != "a" || r.Headers[0].Value != nil || string(r.Headers[1].Value) != "2" {
		t.Errorf("parsed %+v", r)
	}
	r, err = ParseJSONLine([]byte(`{"value":"v","headers":[{"key":"h","value":"1"},{"key":"h","value_base64":"/w=="}]}`))
	if err != nil || r.Key != nil || r.Partition != -1 || !r.Timestamp.IsZero() || len(r.Headers) != 2 || !bytes.Equal(r.Headers[1].Value, []byte{0xff}) {
		t.Errorf("parsed %+v, %v", r, err)
	}
	for _, bad := range []string{`{"key":"a","key_base64":"YQ=="}`, `{"timestamp":"yesterday"}`, `{"partition":-2}`, `{"headers":"h"}`, `{} {}`, `[1]`} {
		if _, err := ParseJSONLine([]byte(bad)); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}

func TestParseFrom(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	for s, want := range map[string]from{
		"": {kind: fromStart}, "start": {kind: fromStart}, "end": {kind: fromEnd}, "12": {kind: fromOffset, n: 12},
		"+3": {kind: fromAfterStart, n: 3}, "-3": {kind: fromBeforeEnd, n: 3}, "@1700": {kind: fromTime, n: 1700},
		"@1970-01-01T00:00:02Z": {kind: fromTime, n: 2000}, "@-10s": {kind: fromTime, n: 990_000},
	} {
		if got, err := parseFrom(s, now); err != nil || got != want {
			t.Errorf("parseFrom(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	for _, bad := range []string{"beginning", "@tomorrow", "@10s", "1.5"} {
		if _, err := parseFrom(bad, now); err == nil {
			t.Errorf("parseFrom(%q) accepted", bad)
		}
	}
	if _, err := outputFormat("%k %q"); err == nil || !strings.Contains(err.Error(), "unknown verb %q") {
		t.Errorf("a bad verb: %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A stop while produce waits for input (Ctrl-C at a terminal) ends it at
// once, with the lines already read produced.
func TestProduceStopWhileWaiting(t *testing.T) {
	b := testbroker.New(t)
	c := newClient(t, b)
	topic := b.Name(t, "t")
	b.CreateTopic(t, topic, 1, nil)
	r, w := io.Pipe()
	defer w.Close()
	pctx, stop := context.WithCancel(ctx(t))
	done := make(chan error, 1)
	var res ProduceResult
	go func() {
		var err error
		res, err = c.Produce(pctx, r, ProduceOptions{Topic: topic, Partition: -1})
		done <- err
	}()
	if _, err := io.WriteString(w, "typed\n"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if got := consume(t, c, ConsumeOptions{Topic: topic, Format: `%v`}); got != "typed" {
			return fmt.Errorf("topic holds %q", got)
		}
		return nil
	})
	stop()
	select {
	case err := <-done:
		if err != nil || res.Records != 1 {
			t.Errorf("stopped produce: %+v, %v", res, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("produce did not return within 10s of its stop while waiting for input")
	}
}
