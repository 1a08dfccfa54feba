package topictool

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ProduceOptions says how Produce reads its lines.
type ProduceOptions struct {
	Topic string
	// Format is "text" (default) or "json" (see ParseJSONLine).
	Format string
	// KeySep, in text, splits each line at its first occurrence into key
	// and value; a line without it is an error. "": the whole line is the
	// value and the key is null.
	KeySep string
	// Partition writes every record to that partition; -1 partitions by
	// key, as the host does. A JSON record's own partition wins.
	Partition int32
	// Headers are added to every record (text and json).
	Headers []kgo.RecordHeader
}

// ProduceResult counts what Produce wrote.
type ProduceResult struct {
	Records     int
	ByPartition map[int32]int
}

// MaxLine bounds one input line: well over what a broker accepts of one
// record by default (message.max.bytes, 1 MiB), so a line over it is a
// mistake (a binary file on stdin), not a record.
const MaxLine = 16 << 20

// Produce writes one record per line of in (empty lines are skipped) to
// o.Topic, and returns once every record is acknowledged or one failed.
// Records are sent as they are read, so a pipe that stays open (a loop,
// a tail -f) produces as it goes.
func (c *Client) Produce(ctx context.Context, in io.Reader, o ProduceOptions) (ProduceResult, error) {
	res := ProduceResult{ByPartition: map[int32]int{}}
	if o.Format == "" {
		o.Format = "text"
	}
	if o.Format != "text" && o.Format != "json" {
		return res, fmt.Errorf("format %q: want text or json", o.Format)
	}
	td, err := c.topic(ctx, o.Topic)
	if err != nil {
		return res, err
	}
	if o.Partition >= int32(len(td.Partitions)) {
		return res, fmt.Errorf("partition %d: topic %s has %d partitions (0-%d)", o.Partition, o.Topic, len(td.Partitions), len(td.Partitions)-1)
	}
	cl, err := c.kafka.NewClient(
		kgo.DefaultProduceTopic(o.Topic),
		kgo.RecordPartitioner(Partitioner()),
		// A line typed at a terminal should go out at once; a file is
		// still batched by the records that queue while one is in flight.
		kgo.ProducerLinger(0),
	)
	if err != nil {
		return res, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()

	var (
		mu    sync.Mutex
		first error
	)
	failed := func() error {
		mu.Lock()
		defer mu.Unlock()
		return first
	}
	var stop error // a line that cannot be a record: the lines before it are still produced
	done := make(chan struct{})
	defer close(done)
	lines := readLines(in, done)
read:
	for {
		var l line
		select {
		case <-ctx.Done():
			break read // stopped (SIGINT) while waiting for input: what was read goes out
		case l = <-lines:
		}
		if l.err != nil {
			if !errors.Is(l.err, io.EOF) {
				stop = fmt.Errorf("reading the input: %w (the lines after it were not produced)", l.err)
			}
			break
		}
		if len(l.text) == 0 {
			continue
		}
		r, err := parseLine(l.text, o)
		if err != nil {
			stop = fmt.Errorf("line %d: %w (the lines after it were not produced)", l.n, err)
			break
		}
		if failed() != nil {
			break
		}
		r.Topic = o.Topic
		n := l.n
		// A context of its own: a stop keeps the records already read.
		cl.Produce(context.WithoutCancel(ctx), r, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = fmt.Errorf("line %d: %w", n, err)
				}
				return
			}
			res.Records++
			res.ByPartition[r.Partition]++
		})
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	if err := cl.Flush(fctx); err != nil {
		return res, errors.Join(stop, fmt.Errorf("waiting for the brokers to acknowledge the records: %w", err))
	}
	mu.Lock()
	defer mu.Unlock()
	if first != nil {
		return res, first
	}
	return res, stop
}

// flushTimeout bounds the wait for the last records' acknowledgements.
const flushTimeout = 30 * time.Second

// line is one line of input (without its line break), or the error that
// ended the input (io.EOF at its end).
type line struct {
	n    int
	text []byte
	err  error
}

// readLines reads in on a goroutine of its own, so that a stop does not
// wait for a line a terminal may never send. The goroutine ends at the
// end of the input or, after its next line, once done is closed; a
// process that stops does not wait for it.
func readLines(in io.Reader, done <-chan struct{}) <-chan line {
	out := make(chan line)
	go func() {
		send := func(l line) bool {
			select {
			case out <- l:
				return true
			case <-done:
				return false
			}
		}
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), MaxLine)
		n := 0
		for sc.Scan() {
			n++
			if !send(line{n: n, text: bytes.Clone(bytes.TrimSuffix(sc.Bytes(), []byte("\r")))}) {
				return
			}
		}
		err := sc.Err()
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("line %d is longer than %d MiB", n+1, MaxLine>>20)
		}
		if err == nil {
			err = io.EOF
		}
		send(line{n: n + 1, err: err})
	}()
	return out
}

// Partitioner is the host's partitioner for records it writes (the
// runner's outputPartitioner): a record's own Partition when it is 0 or
// more, else Kafka's default for a key (murmur2, kgo.StickyKeyPartitioner)
// and a sticky partition for a null key.
func Partitioner() kgo.Partitioner { return partitioner{kgo.StickyKeyPartitioner(nil)} }

type partitioner struct{ byKey kgo.Partitioner }

func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return &topicPartitioner{byKey: p.byKey.ForTopic(topic)}
}

type topicPartitioner struct{ byKey kgo.TopicPartitioner }

func (p *topicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return r.Partition >= 0 || p.byKey.RequiresConsistency(r)
}

func (p *topicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Partition >= 0 {
		return int(r.Partition) % n
	}
	return p.byKey.Partition(r, n)
}

// parseLine turns one input line into a record.
func parseLine(line []byte, o ProduceOptions) (*kgo.Record, error) {
	var r *kgo.Record
	if o.Format == "json" {
		var err error
		if r, err = ParseJSONLine(line); err != nil {
			return nil, err
		}
	} else {
		r = &kgo.Record{Partition: -1}
		if o.KeySep == "" {
			r.Value = append([]byte{}, line...)
		} else {
			k, v, ok := bytes.Cut(line, []byte(o.KeySep))
			if !ok {
				return nil, fmt.Errorf("no key separator %q in %q (every line is KEY%sVALUE; without --key-sep a line is a value)", o.KeySep, abbrev(line), o.KeySep)
			}
			r.Key, r.Value = append([]byte{}, k...), append([]byte{}, v...)
		}
	}
	if r.Partition < 0 {
		r.Partition = o.Partition
	}
	r.Headers = append(r.Headers, o.Headers...)
	return r, nil
}

func abbrev(b []byte) string {
	if len(b) > 60 {
		return string(b[:57]) + "..."
	}
	return string(b)
}

// jsonRecord is a record as a JSON line: what ParseJSONLine reads and
// Consume's json format writes.
type jsonRecord struct {
	Topic     string          `json:"topic,omitempty"`
	Partition *int32          `json:"partition,omitempty"`
	Offset    *int64          `json:"offset,omitempty"`
	Timestamp json.RawMessage `json:"timestamp,omitempty"`
	// Key and Value are text; KeyBase64 and ValueBase64 take bytes that are
	// not UTF-8. A missing or null key or value is null.
	Key         *string         `json:"key"`
	KeyBase64   *string         `json:"key_base64,omitempty"`
	Value       *string         `json:"value"`
	ValueBase64 *string         `json:"value_base64,omitempty"`
	Headers     json.RawMessage `json:"headers,omitempty"`
}

// jsonHeader is one header in the list form.
type jsonHeader struct {
	Key         string  `json:"key"`
	Value       *string `json:"value"`
	ValueBase64 *string `json:"value_base64,omitempty"`
}

// ParseJSONLine reads a record from a JSON object:
//
//	{"key": "k", "value": "v", "headers": {"h": "x"}, "timestamp": 1700000000000, "partition": 2}
//
// key and value are strings or null (missing: null); key_base64 and
// value_base64 take bytes that are not text. headers is an object of
// names to values, or a list of {"key", "value"} objects (which keeps
// order and repeated names). timestamp is milliseconds since the epoch or
// an RFC 3339 time (missing: now). partition (missing: by key, as the
// host). topic and offset, which Consume's json output carries, are
// ignored, so that output can be produced again.
func ParseJSONLine(line []byte) (*kgo.Record, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var jr jsonRecord
	if err := dec.Decode(&jr); err != nil {
		return nil, fmt.Errorf("not a JSON record (%v): %q", err, abbrev(line))
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON value on the line: %q", abbrev(line))
	}
	r := &kgo.Record{Partition: -1}
	var err error
	if r.Key, err = textOrBase64("key", jr.Key, jr.KeyBase64); err != nil {
		return nil, err
	}
	if r.Value, err = textOrBase64("value", jr.Value, jr.ValueBase64); err != nil {
		return nil, err
	}
	if jr.Partition != nil {
		if *jr.Partition < 0 {
			return nil, fmt.Errorf("partition %d is negative", *jr.Partition)
		}
		r.Partition = *jr.Partition
	}
	if len(jr.Timestamp) > 0 && string(jr.Timestamp) != "null" {
		if r.Timestamp, err = parseTimestamp(jr.Timestamp); err != nil {
			return nil, err
		}
	}
	if r.Headers, err = parseHeaders(jr.Headers); err != nil {
		return nil, err
	}
	return r, nil
}

func textOrBase64(field string, text, b64 *string) ([]byte, error) {
	switch {
	case text != nil && b64 != nil:
		return nil, fmt.Errorf("both %s and %s_base64", field, field)
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, fmt.Errorf("%s_base64: %w", field, err)
		}
		return b, nil
	case text != nil:
		return []byte(*text), nil
	}
	return nil, nil
}

func parseTimestamp(raw json.RawMessage) (time.Time, error) {
	var ms int64
	if err := json.Unmarshal(raw, &ms); err == nil {
		return time.UnixMilli(ms), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return t, nil
		}
		if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.UnixMilli(ms), nil
		}
	}
	return time.Time{}, fmt.Errorf("timestamp %s: want milliseconds since the epoch or an RFC 3339 time such as \"2025-01-02T15:04:05Z\"", raw)
}

func parseHeaders(raw json.RawMessage) ([]kgo.RecordHeader, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []jsonHeader
	if err := json.Unmarshal(raw, &list); err == nil {
		hs := make([]kgo.RecordHeader, len(list))
		for i, h := range list {
			v, err := textOrBase64("headers["+strconv.Itoa(i)+"].value", h.Value, h.ValueBase64)
			if err != nil {
				return nil, err
			}
			hs[i] = kgo.RecordHeader{Key: h.Key, Value: v}
		}
		return hs, nil
	}
	var obj map[string]*string
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("headers: want an object of names to strings or a list of {\"key\": ..., \"value\": ...}")
	}
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names) // an object has no order: make one
	hs := make([]kgo.RecordHeader, 0, len(obj))
	for _, k := range names {
		var v []byte
		if obj[k] != nil {
			v = []byte(*obj[k])
		}
		hs = append(hs, kgo.RecordHeader{Key: k, Value: v})
	}
	return hs, nil
}

// jsonOf is r as Consume's json output writes it.
func jsonOf(r *kgo.Record) jsonRecord {
	p, o := r.Partition, r.Offset
	jr := jsonRecord{Topic: r.Topic, Partition: &p, Offset: &o,
		Timestamp: json.RawMessage(strconv.FormatInt(r.Timestamp.UnixMilli(), 10))}
	jr.Key, jr.KeyBase64 = textOrBase64Out(r.Key)
	jr.Value, jr.ValueBase64 = textOrBase64Out(r.Value)
	if len(r.Headers) > 0 {
		hs := make([]jsonHeader, len(r.Headers))
		for i, h := range r.Headers {
			hs[i].Key = h.Key
			hs[i].Value, hs[i].ValueBase64 = textOrBase64Out(h.Value)
		}
		jr.Headers, _ = json.Marshal(hs)
	}
	return jr
}

// textOrBase64Out is the JSON of bytes: null, text, or base64 for bytes
// that are not UTF-8.
func textOrBase64Out(b []byte) (text, b64 *string) {
	switch {
	case b == nil:
		return nil, nil
	case utf8.Valid(b):
		s := string(b)
		return &s, nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return nil, &s
}
