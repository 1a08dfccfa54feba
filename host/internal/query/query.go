// Package query is the interactive-query endpoint: reads of the
// processors' stores while the app runs, from committed state only.
//
//	GET /v1/stores/{processor}/{store}/keys/{key}
//	    the key's value: 200, or 404 when the store has none
//	GET /v1/stores/{processor}/{store}/keys?partition=P[&prefix=K | &from=K&to=K][&limit=N]
//	    up to limit keys and values of the task on partition P, in key order
//
// The key in the path is one percent-encoded path segment (a '/' in it
// as %2F: url.PathEscape). Keys and values are bytes: ?format=utf8 (default), hex or base64 (the
// standard alphabet, padded or not; URL-safe accepted) says how the key in
// the path, prefix, from and to are written, and how keys and values are
// written in the answer; ?value_format= gives values another one (a
// counter's 8 bytes under a readable key). An answer in utf8 that would
// not be valid UTF-8 is refused with 422: ask again in hex or base64. Every answer carries the
// store's checkpoint: the changelog offset after the last record its
// state holds.
//
// A key's task is the partition the Kafka default partitioner (murmur2)
// gives it on the processor's task topic: the store is keyed as its input
// is, which is how a processor that counts or keeps the latest value per
// input key writes it. For a store keyed otherwise, give ?partition=P.
//
// Where the task is:
//
//   - this process holds it, its state complete: the answer;
//   - this process holds it but restores it, or it stopped on a failure, or
//     a rebalance takes it away: 503 with Retry-After, never stale data;
//   - another process holds it, as the control topic's member records say
//     (control/member.go): 307 to that process, with hop=1 added, and a
//     process that gets a hop=1 request for a task it does not hold answers
//     503 (the records are catching up with a rebalance) rather than
//     redirecting again;
//   - no process is known to: 503.
//
// Everything a client can ask is bounded: key size (MaxKeyBytes), scan
// length (MaxLimit) and answer bytes (MaxAnswerBytes), reads at once
// (MaxConcurrent, 503 beyond), header size and time to send them.
package query

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/admin"
	"github.com/wasmstream/wasmstream/host/internal/state"
)

// Bounds of what a client can ask.
const (
	// MaxKeyBytes bounds a key, prefix, from or to, decoded: the ABI's
	// bound on a store key (4 KiB).
	MaxKeyBytes = 4 << 10
	// DefaultLimit and MaxLimit are a scan's default and largest limit.
	DefaultLimit = 100
	MaxLimit     = 1000
	// MaxAnswerBytes bounds the keys and values of one scan's answer
	// (before encoding); a scan that reaches it stops with more = true.
	// A single value larger than it is still answered by a get.
	MaxAnswerBytes = 4 << 20
	// MaxConcurrent bounds the reads one process serves at once.
	MaxConcurrent = 16
	// RetryAfter is the Retry-After of a 503, in seconds.
	RetryAfter = 1
)

// Source is what the endpoint reads: the host implements it.
type Source interface {
	// Processor returns the topic a processor's tasks are named by (the
	// task of partition p reads partition p of it) and its queryable
	// stores; ok is false for an unknown processor.
	Processor(name string) (topic string, stores []string, ok bool)
	// Partitions is the partition count of topic.
	Partitions(ctx context.Context, topic string) (int, error)
	// Task reports whether this process holds the task of processor on
	// partition and whether its state may be read (see runner.Serving),
	// and if not why; gen is a token that compares equal (==) only while
	// the process's tasks have not changed.
	Task(processor string, partition int32) (held, ready bool, why string, gen any)
	// Get and Scan read committed state (state.DB.QueryGet, QueryScan).
	Get(processor string, partition int32, store string, key []byte) (value []byte, found bool, checkpoint int64, err error)
	Scan(processor string, partition int32, store string, start, end []byte, limit, maxBytes int) (kvs []state.KV, more bool, checkpoint int64, err error)
	// Owner is the base URL of the process holding the task, as the
	// member records say, or "" if none is known.
	Owner(processor string, partition int32) string
}

// Server is a running query endpoint.
type Server struct {
	src   Source
	token string
	log   *slog.Logger
	ln    net.Listener
	srv   *http.Server
	slots chan struct{}
	done  chan struct{}
}

// New listens on listen (admin.ListenAddress's rules) and serves. token ""
// answers every query; otherwise each must carry it as a bearer token.
func New(listen, token string, src Source, log *slog.Logger) (*Server, error) {
	addr, err := admin.ListenAddress(listen)
	if err != nil {
		return nil, fmt.Errorf("query.listen: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("query.listen %s: %w", listen, err)
	}
	s := &Server{src: src, token: token, log: log, ln: ln, slots: make(chan struct{}, MaxConcurrent), done: make(chan struct{})}
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    32 << 10,
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("query endpoint stopped", "err", err)
		}
	}()
	log.Info("interactive-query endpoint listening", "addr", ln.Addr().String(), "token", token != "")
	return s, nil
}

// Addr is the address the endpoint listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the endpoint, waiting up to ctx for answers in flight.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	<-s.done
	return err
}

// Handler returns the endpoint's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/stores/{processor}/{store}/keys/{key...}", s.get)
	mux.HandleFunc("GET /v1/stores/{processor}/{store}/keys", s.scan)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if s.token != "" && !admin.BearerOK(r.Header.Get("Authorization"), s.token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="wasmstream-query"`)
			fail(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		default:
			unavailable(w, fmt.Sprintf("more than %d queries at once", MaxConcurrent))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// Answer is a get's answer.
type Answer struct {
	Processor   string `json:"processor"`
	Store       string `json:"store"`
	Partition   int32  `json:"partition"`
	Format      string `json:"format"`
	ValueFormat string `json:"value_format"`
	Key         string `json:"key"`
	Found       bool   `json:"found"`
	Value       string `json:"value,omitempty"`
	Checkpoint  int64  `json:"checkpoint"`
}

// ScanAnswer is a scan's answer. Next, when More, is the key to give as
// from to continue.
type ScanAnswer struct {
	Processor   string `json:"processor"`
	Store       string `json:"store"`
	Partition   int32  `json:"partition"`
	Format      string `json:"format"`
	ValueFormat string `json:"value_format"`
	Items       []Item `json:"items"`
	More        bool   `json:"more"`
	Next        string `json:"next,omitempty"`
	Checkpoint  int64  `json:"checkpoint"`
}

// Item is one key and value of a scan.
type Item struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Error is the body of every answer other than 200 and 404.
type Error struct {
	Error string `json:"error"`
}

// target is a request's processor, store and task, checked.
type target struct {
	processor, store string
	partition        int32
	format           format
}

// formats returns the request's key and value formats.
func formats(q url.Values) (key, value format, err error) {
	if key, err = parseFormat(q.Get("format")); err != nil {
		return key, value, err
	}
	if q.Get("value_format") == "" {
		return key, key, nil
	}
	value, err = parseFormat(q.Get("value_format"))
	return key, value, err
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	f, vf, err := formats(r.URL.Query())
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	key, err := f.decode("key", r.PathValue("key"))
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	t, ok := s.target(w, r, f, key)
	if !ok {
		return
	}
	var (
		value []byte
		found bool
		cp    int64
	)
	if !s.read(w, r, t, func() (err error) {
		value, found, cp, err = s.src.Get(t.processor, t.partition, t.store, key)
		return err
	}) {
		return
	}
	a := Answer{Processor: t.processor, Store: t.store, Partition: t.partition, Format: f.name, ValueFormat: vf.name,
		Found: found, Checkpoint: cp}
	a.Key, _ = f.encode(key) // it decoded from this format
	status := http.StatusNotFound
	if found {
		status = http.StatusOK
		if a.Value, err = vf.encode(value); err != nil {
			fail(w, http.StatusUnprocessableEntity, err.Error())
			return
		}
	}
	writeJSON(w, status, a)
}

func (s *Server) scan(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, vf, err := formats(q)
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	if q.Get("partition") == "" {
		fail(w, http.StatusBadRequest, "a scan reads one task: give ?partition=P")
		return
	}
	limit := DefaultLimit
	if l := q.Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 || limit > MaxLimit {
			fail(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want 1 to %d", l, MaxLimit))
			return
		}
	}
	var start, end []byte
	prefix, hasPrefix := q["prefix"]
	_, hasFrom := q["from"]
	_, hasTo := q["to"]
	switch {
	case hasPrefix && (hasFrom || hasTo):
		fail(w, http.StatusBadRequest, "give prefix, or from and to, not both")
		return
	case hasPrefix:
		if start, err = f.decode("prefix", prefix[0]); err != nil {
			fail(w, http.StatusBadRequest, err.Error())
			return
		}
		end = prefixEnd(start)
	default:
		if hasFrom {
			if start, err = f.decode("from", q.Get("from")); err != nil {
				fail(w, http.StatusBadRequest, err.Error())
				return
			}
		}
		if hasTo {
			if end, err = f.decode("to", q.Get("to")); err != nil {
				fail(w, http.StatusBadRequest, err.Error())
				return
			}
		}
	}
	t, ok := s.target(w, r, f, nil)
	if !ok {
		return
	}
	var (
		kvs  []state.KV
		more bool
		cp   int64
	)
	if !s.read(w, r, t, func() (err error) {
		kvs, more, cp, err = s.src.Scan(t.processor, t.partition, t.store, start, end, limit, MaxAnswerBytes)
		return err
	}) {
		return
	}
	a := ScanAnswer{Processor: t.processor, Store: t.store, Partition: t.partition, Format: f.name, ValueFormat: vf.name,
		More: more, Checkpoint: cp, Items: make([]Item, 0, len(kvs))}
	for _, kv := range kvs {
		k, err1 := f.encode(kv.Key)
		v, err2 := vf.encode(kv.Value)
		if err := errors.Join(err1, err2); err != nil {
			fail(w, http.StatusUnprocessableEntity, err.Error())
			return
		}
		a.Items = append(a.Items, Item{Key: k, Value: v})
	}
	if more && len(kvs) > 0 {
		// The smallest key after the last one answered.
		a.Next, _ = f.encode(append(append([]byte(nil), kvs[len(kvs)-1].Key...), 0))
	}
	writeJSON(w, http.StatusOK, a)
}

// target checks the request's processor, store and partition (key's, if
// key is not nil, else ?partition) and answers 4xx itself when ok is
// false.
func (s *Server) target(w http.ResponseWriter, r *http.Request, f format, key []byte) (t target, ok bool) {
	t.processor, t.store, t.format = r.PathValue("processor"), r.PathValue("store"), f
	topic, stores, known := s.src.Processor(t.processor)
	if !known {
		fail(w, http.StatusNotFound, fmt.Sprintf("unknown processor %q, or it has no stores", t.processor))
		return t, false
	}
	if !contains(stores, t.store) {
		fail(w, http.StatusNotFound, fmt.Sprintf("processor %q has no store %q (its stores: %v)", t.processor, t.store, stores))
		return t, false
	}
	n, err := s.src.Partitions(r.Context(), topic)
	if err != nil {
		unavailable(w, fmt.Sprintf("the partitions of %s are unknown: %v", topic, err))
		return t, false
	}
	if p := r.URL.Query().Get("partition"); p != "" {
		v, err := strconv.ParseInt(p, 10, 32)
		if err != nil || v < 0 || int(v) >= n {
			fail(w, http.StatusBadRequest, fmt.Sprintf("partition %q: %s has partitions 0 to %d", p, topic, n-1))
			return t, false
		}
		t.partition = int32(v)
	} else {
		t.partition = KeyPartition(key, n)
	}
	return t, true
}

// read runs do if this process holds the task with its state complete,
// and checks afterwards that it still did; otherwise it redirects or
// answers 503. It reports whether do ran and its answer is to be given.
func (s *Server) read(w http.ResponseWriter, r *http.Request, t target, do func() error) bool {
	held, ready, why, gen := s.src.Task(t.processor, t.partition)
	switch {
	case held && !ready:
		unavailable(w, fmt.Sprintf("task %s/%d: %s", t.processor, t.partition, why))
		return false
	case !held:
		s.redirect(w, r, t)
		return false
	}
	if err := do(); err != nil {
		s.log.Warn("query: reading a store", "processor", t.processor, "store", t.store, "partition", t.partition, "err", err)
		unavailable(w, fmt.Sprintf("task %s/%d: %v", t.processor, t.partition, err))
		return false
	}
	// The task may have left (a revoke) or stopped during the read: then
	// what was read may be behind its next owner, and is not answered.
	if held, ready, why, now := s.src.Task(t.processor, t.partition); now != gen && (!held || !ready) {
		if why == "" {
			why = "moved to another process during the read"
		}
		unavailable(w, fmt.Sprintf("task %s/%d: %s", t.processor, t.partition, why))
		return false
	}
	return true
}

// redirect sends the client to the process holding the task, if one is
// known and this is not already a redirected request.
func (s *Server) redirect(w http.ResponseWriter, r *http.Request, t target) {
	if r.URL.Query().Get("hop") != "" {
		unavailable(w, fmt.Sprintf("task %s/%d is not on this process (a rebalance moved it; the member records are catching up)", t.processor, t.partition))
		return
	}
	owner := s.src.Owner(t.processor, t.partition)
	if owner == "" {
		unavailable(w, fmt.Sprintf("no process is known to hold task %s/%d (a rebalance, or no process runs it)", t.processor, t.partition))
		return
	}
	base, err := url.Parse(owner)
	if err != nil {
		unavailable(w, fmt.Sprintf("task %s/%d: its process advertises %q, not a URL", t.processor, t.partition, owner))
		return
	}
	q := r.URL.Query()
	q.Set("hop", "1")
	to := *base
	to.Path, to.RawPath, to.RawQuery = r.URL.Path, r.URL.RawPath, q.Encode()
	w.Header().Set("Location", to.String())
	writeJSON(w, http.StatusTemporaryRedirect, Error{Error: fmt.Sprintf("task %s/%d is on %s", t.processor, t.partition, owner)})
}

// KeyPartition is the partition the Kafka default partitioner (murmur2 of
// the key, as franz-go's and the Java client's) gives key among n.
func KeyPartition(key []byte, n int) int32 {
	return int32(kgo.StickyKeyPartitioner(nil).ForTopic("").Partition(&kgo.Record{Key: key}, n))
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// prefixEnd is the smallest key after every key starting with p; nil (no
// bound) when p is empty or all 0xff.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// format is how keys and values are written in requests and answers.
type format struct {
	name   string
	decode func(what, s string) ([]byte, error)
	encode func(b []byte) (string, error)
}

func parseFormat(name string) (format, error) {
	bounded := func(dec func(string) ([]byte, error)) func(what, s string) ([]byte, error) {
		return func(what, s string) ([]byte, error) {
			b, err := dec(s)
			if err != nil {
				return nil, fmt.Errorf("%s is not %s: %v", what, name, err)
			}
			if len(b) > MaxKeyBytes {
				return nil, fmt.Errorf("%s of %d bytes (at most %d)", what, len(b), MaxKeyBytes)
			}
			return b, nil
		}
	}
	switch name {
	case "", "utf8":
		name = "utf8"
		return format{name: name,
			decode: bounded(func(s string) ([]byte, error) { return []byte(s), nil }),
			encode: func(b []byte) (string, error) {
				if !utf8.Valid(b) {
					return "", errors.New("a key or value is not valid UTF-8: ask with format=hex or format=base64")
				}
				return string(b), nil
			}}, nil
	case "hex":
		return format{name: name, decode: bounded(hex.DecodeString),
			encode: func(b []byte) (string, error) { return hex.EncodeToString(b), nil }}, nil
	case "base64":
		return format{name: name, decode: bounded(decodeBase64),
			encode: func(b []byte) (string, error) { return base64.StdEncoding.EncodeToString(b), nil }}, nil
	}
	return format{}, fmt.Errorf("format %q: want utf8, hex or base64", name)
}

// decodeBase64 takes standard or URL-safe base64, padded or not.
func decodeBase64(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

func fail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, Error{Error: msg})
}

func unavailable(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(RetryAfter))
	fail(w, http.StatusServiceUnavailable, msg)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
