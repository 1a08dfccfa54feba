package topictool

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ConsumeOptions says what Consume reads and how it prints it.
type ConsumeOptions struct {
	Topic string
	// Partitions to read; empty: all.
	Partitions []int32
	// From is where each partition starts: "start" (default), "end", an
	// offset N, "+N" (N after the start), "-N" (N before the end) or
	// "@TIME": the first record at or after TIME, in milliseconds since
	// the epoch, RFC 3339, or a duration ago (@-10m).
	From string
	// Follow waits for new records until ctx ends; otherwise Consume
	// stops at the end offsets of when it started.
	Follow bool
	// Max stops after that many records; 0: no limit.
	Max int
	// Format is "text" (default), "json" (one object per line, which
	// produce --format json reads back) or a template (see Template).
	Format string
	// ReadUncommitted also reads records of open and aborted
	// transactions; by default only committed records are read, as the
	// host's consumers do.
	ReadUncommitted bool
}

// ConsumeResult is what Consume read.
type ConsumeResult struct {
	Records int
	// Short lists the partitions Consume gave up on before their end
	// offset: nothing came for IdleStop, which happens when the last
	// offsets below the end hold aborted records only (invisible under
	// read_committed).
	Short []int32
}

// IdleStop is how long Consume, without Follow, waits for a record before
// it stops short of the end offsets.
const IdleStop = 5 * time.Second

// Consume reads o.Topic and writes each record to out in o.Format.
func (c *Client) Consume(ctx context.Context, out io.Writer, o ConsumeOptions) (ConsumeResult, error) {
	var res ConsumeResult
	format, err := outputFormat(o.Format)
	if err != nil {
		return res, err
	}
	from, err := parseFrom(o.From, time.Now())
	if err != nil {
		return res, err
	}
	td, err := c.topic(ctx, o.Topic)
	if err != nil {
		return res, err
	}
	parts := o.Partitions
	if len(parts) == 0 {
		for _, p := range td.Partitions.Sorted() {
			parts = append(parts, p.Partition)
		}
	}
	for _, p := range parts {
		if _, ok := td.Partitions[p]; !ok {
			return res, fmt.Errorf("partition %d: topic %s has %d partitions (0-%d)", p, o.Topic, len(td.Partitions), len(td.Partitions)-1)
		}
	}
	starts, ends, err := c.bounds(ctx, o.Topic, !o.ReadUncommitted)
	if err != nil {
		return res, err
	}
	var after kadm.ListedOffsets
	if from.kind == fromTime {
		if after, err = c.adm.ListOffsetsAfterMilli(ctx, from.n, o.Topic); err == nil {
			err = after.Error()
		}
		if err != nil {
			return res, fmt.Errorf("listing the offsets of %s after %s: %w", o.Topic, time.UnixMilli(from.n).UTC().Format(time.RFC3339Nano), err)
		}
	}
	offsets := map[int32]kgo.Offset{}
	remaining := map[int32]int64{} // partition -> end offset still to reach
	for _, p := range parts {
		start, end := starts[p], ends[p]
		at := from.offset(start, end)
		if from.kind == fromTime {
			at = end
			if l, ok := after.Lookup(o.Topic, p); ok && l.Offset >= 0 {
				at = min(max(l.Offset, start), end)
			}
		}
		offsets[p] = kgo.NewOffset().At(at)
		if at < end {
			remaining[p] = end
		}
	}
	if !o.Follow && len(remaining) == 0 {
		return res, nil
	}
	isolation := kgo.ReadCommitted()
	if o.ReadUncommitted {
		isolation = kgo.ReadUncommitted()
	}
	cl, err := c.kafka.NewClient(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.Topic: offsets}),
		kgo.FetchIsolationLevel(isolation),
		// Transaction markers advance the position past aborted records,
		// which are otherwise invisible: without them a partition that
		// ends in an aborted transaction would never look read to its end.
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	if err != nil {
		return res, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()

	w := bufio.NewWriter(out)
	defer w.Flush()
	for o.Follow || len(remaining) > 0 {
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if !o.Follow {
			pctx, cancel = context.WithTimeout(ctx, IdleStop)
		}
		fetches := cl.PollFetches(pctx)
		idle := pctx.Err() != nil
		cancel()
		if ctx.Err() != nil {
			return res, nil // stopped (SIGINT): what was read is out
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("reading %s partition %d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return res, ferr
		}
		got, done := false, false
		fetches.EachRecord(func(r *kgo.Record) {
			if done {
				return
			}
			got = true
			if end, ok := remaining[r.Partition]; ok && r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			format(w, r)
			res.Records++
			done = o.Max > 0 && res.Records >= o.Max
		})
		if err := w.Flush(); err != nil {
			return res, err
		}
		if done {
			return res, nil
		}
		if !o.Follow && !got && idle {
			for p := range remaining {
				res.Short = append(res.Short, p)
			}
			slices.Sort(res.Short)
			return res, nil
		}
	}
	return res, nil
}

// bounds lists the start and end offsets of topic's partitions; the end
// is the last stable offset when committed.
func (c *Client) bounds(ctx context.Context, topic string, committed bool) (starts, ends map[int32]int64, err error) {
	list := func(f func(context.Context, ...string) (kadm.ListedOffsets, error), what string) (map[int32]int64, error) {
		l, err := f(ctx, topic)
		if err == nil {
			err = l.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("listing the %s offsets of %s: %w", what, topic, err)
		}
		out := map[int32]int64{}
		for p, o := range l[topic] {
			out[p] = o.Offset
		}
		return out, nil
	}
	if starts, err = list(c.adm.ListStartOffsets, "start"); err != nil {
		return nil, nil, err
	}
	if committed {
		ends, err = list(c.adm.ListCommittedOffsets, "last stable")
	} else {
		ends, err = list(c.adm.ListEndOffsets, "end")
	}
	return starts, ends, err
}

// from is a parsed ConsumeOptions.From.
type from struct {
	kind int
	n    int64 // the offset, the count, or the time in ms
}

const (
	fromStart = iota
	fromEnd
	fromOffset
	fromAfterStart
	fromBeforeEnd
	fromTime
)

func parseFrom(s string, now time.Time) (from, error) {
	bad := func() (from, error) {
		return from{}, fmt.Errorf("--from %q: want start, end, an offset N, +N (N after the start), -N (N before the end) "+
			"or @TIME (@1700000000000 ms since the epoch, @2025-01-02T15:04:05Z, @-10m: ten minutes ago)", s)
	}
	switch {
	case s == "" || s == "start":
		return from{kind: fromStart}, nil
	case s == "end":
		return from{kind: fromEnd}, nil
	case strings.HasPrefix(s, "@"):
		t := s[1:]
		if ms, err := strconv.ParseInt(t, 10, 64); err == nil {
			return from{kind: fromTime, n: ms}, nil
		}
		if at, err := time.Parse(time.RFC3339Nano, t); err == nil {
			return from{kind: fromTime, n: at.UnixMilli()}, nil
		}
		if d, err := time.ParseDuration(t); err == nil && d < 0 {
			return from{kind: fromTime, n: now.Add(d).UnixMilli()}, nil
		}
		return bad()
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(s, "+"), 10, 64)
	if err != nil {
		return bad()
	}
	switch {
	case strings.HasPrefix(s, "+"):
		return from{kind: fromAfterStart, n: n}, nil
	case n < 0:
		return from{kind: fromBeforeEnd, n: -n}, nil
	}
	return from{kind: fromOffset, n: n}, nil
}

// offset is where a partition of offsets [start, end) begins.
func (f from) offset(start, end int64) int64 {
	var at int64
	switch f.kind {
	case fromStart:
		at = start
	case fromEnd:
		at = end
	case fromOffset:
		at = f.n
	case fromAfterStart:
		at = start + f.n
	case fromBeforeEnd:
		at = end - f.n
	}
	return min(max(at, start), end)
}

// outputFormat returns the writer of one record in format.
func outputFormat(format string) (func(w *bufio.Writer, r *kgo.Record), error) {
	switch format {
	case "", "text":
		return writeText, nil
	case "json":
		return func(w *bufio.Writer, r *kgo.Record) {
			b, _ := json.Marshal(jsonOf(r))
			w.Write(b)
			w.WriteByte('\n')
		}, nil
	}
	if !strings.Contains(format, "%") {
		return nil, fmt.Errorf("--format %q: want text, json, or a template with %%k (key), %%v (value) and the like", format)
	}
	t, err := parseTemplate(format)
	if err != nil {
		return nil, err
	}
	return t.write, nil
}

// writeText is the text format, for people: one line per record,
//
//	PARTITION/OFFSET KEY VALUE {HEADER=VALUE, ...}
//
// with a null key or value as (null), and anything that is not printable
// text Go-quoted (a line break in a value cannot break the line).
func writeText(w *bufio.Writer, r *kgo.Record) {
	fmt.Fprintf(w, "%d/%d %s %s", r.Partition, r.Offset, show(r.Key), show(r.Value))
	if len(r.Headers) > 0 {
		w.WriteString(" {")
		for i, h := range r.Headers {
			if i > 0 {
				w.WriteString(", ")
			}
			w.WriteString(show([]byte(h.Key)) + "=" + show(h.Value))
		}
		w.WriteByte('}')
	}
	w.WriteByte('\n')
}

// show renders bytes for the text format.
func show(b []byte) string {
	switch {
	case b == nil:
		return "(null)"
	case len(b) == 0:
		return `""`
	case !printable(b) || string(b) == "(null)" || b[0] == '"':
		return strconv.Quote(string(b))
	}
	return string(b)
}

func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}

// Template is an output format with verbs:
//
//	%t topic  %p partition  %o offset  %k key  %v value
//	%h headers (name=value, comma-separated)  %d timestamp (ms)
//	%T timestamp (RFC 3339, UTC)  %% a percent sign
//
// and the escapes \n, \t and \\. Keys, values and headers are written as
// they are (a null one as nothing). Nothing is added: end with \n for one
// record per line.
type Template struct {
	parts []func(w *bufio.Writer, r *kgo.Record)
}

func parseTemplate(s string) (*Template, error) {
	t := &Template{}
	lit := func(b string) {
		t.parts = append(t.parts, func(w *bufio.Writer, _ *kgo.Record) { w.WriteString(b) })
	}
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			lit(text.String())
			text.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c != '%' && c != '\\') || i+1 == len(s) {
			if c == '%' {
				return nil, fmt.Errorf("--format %q: a %% at the end (%%%% is a percent sign)", s)
			}
			text.WriteByte(c)
			continue
		}
		i++
		if c == '\\' {
			switch s[i] {
			case 'n':
				text.WriteByte('\n')
			case 't':
				text.WriteByte('\t')
			case '\\':
				text.WriteByte('\\')
			default:
				text.WriteByte('\\')
				text.WriteByte(s[i])
			}
			continue
		}
		if s[i] == '%' {
			text.WriteByte('%')
			continue
		}
		flush()
		var part func(w *bufio.Writer, r *kgo.Record)
		switch s[i] {
		case 't':
			part = func(w *bufio.Writer, r *kgo.Record) { w.WriteString(r.Topic) }
		case 'p':
			part = func(w *bufio.Writer, r *kgo.Record) { w.WriteString(strconv.Itoa(int(r.Partition))) }
		case 'o':
			part = func(w *bufio.Writer, r *kgo.Record) { w.WriteString(strconv.FormatInt(r.Offset, 10)) }
		case 'k':
			part = func(w *bufio.Writer, r *kgo.Record) { w.Write(r.Key) }
		case 'v':
			part = func(w *bufio.Writer, r *kgo.Record) { w.Write(r.Value) }
		case 'd':
			part = func(w *bufio.Writer, r *kgo.Record) { w.WriteString(strconv.FormatInt(r.Timestamp.UnixMilli(), 10)) }
		case 'T':
			part = func(w *bufio.Writer, r *kgo.Record) {
				w.WriteString(r.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
			}
		case 'h':
			part = func(w *bufio.Writer, r *kgo.Record) {
				for i, h := range r.Headers {
					if i > 0 {
						w.WriteByte(',')
					}
					w.WriteString(h.Key)
					w.WriteByte('=')
					w.Write(h.Value)
				}
			}
		default:
			return nil, fmt.Errorf("--format %q: unknown verb %%%c (%%t topic, %%p partition, %%o offset, %%k key, %%v value, %%h headers, %%d timestamp ms, %%T timestamp, %%%% percent)", s, s[i])
		}
		t.parts = append(t.parts, part)
	}
	flush()
	return t, nil
}

func (t *Template) write(w *bufio.Writer, r *kgo.Record) {
	for _, p := range t.parts {
		p(w, r)
	}
}
