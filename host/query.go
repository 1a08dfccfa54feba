package host

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/control"
	ideploy "github.com/wasmstream/wasmstream/host/internal/deploy"
	"github.com/wasmstream/wasmstream/host/internal/kafkasec"
	"github.com/wasmstream/wasmstream/host/internal/query"
	"github.com/wasmstream/wasmstream/host/internal/runner"
	"github.com/wasmstream/wasmstream/host/internal/state"
)

// Interactive queries (query.listen): the host is the query endpoint's
// Source. It reads each stateful processor's database for the tasks its
// runners hold (runner.Serving says which, and which are restoring), asks
// the brokers for the task topics' partition counts, and knows where the
// other processes' tasks are from the member records of the control topic
// (query.Directory), to which it publishes its own (query.Advertise).

// advertiseInterval is how often the host checks whether its tasks
// changed, to publish them: a moved task is redirected to its new process
// at most this long (plus a produce and a follow) after the rebalance.
const advertiseInterval = 500 * time.Millisecond

// partitionsTTL is how long a topic's partition count is cached.
const partitionsTTL = 10 * time.Second

// queryHost is the host as the query endpoint sees it.
type queryHost struct {
	h      *Host
	member string // this process's member name in the control topic
	dir    *query.Directory
	procs  map[string]queryProc

	admOnce sync.Once
	adm     *kadm.Client
	admErr  error
	cl      *kgo.Client

	partsMu sync.Mutex
	parts   map[string]cachedCount
}

type queryProc struct {
	topic  string // the topic the tasks are named by
	stores []string
	expiry map[string]state.Expiry
	db     *state.DB
}

type cachedCount struct {
	n  int
	at time.Time
}

// newQueryHost describes the stateful processors of specs for queries.
func newQueryHost(h *Host, member string, specs []runner.ProcessorSpec) *queryHost {
	q := &queryHost{h: h, member: member, dir: query.NewDirectory(nil), procs: map[string]queryProc{}, parts: map[string]cachedCount{}}
	for _, spec := range specs {
		stores := spec.Stores
		if spec.TimeStore {
			stores = stores[:len(stores)-1] // the time store is the host's, never the plugin's
		}
		if len(stores) == 0 || spec.State == nil {
			continue
		}
		q.procs[spec.Name] = queryProc{topic: spec.Inputs[0], stores: stores, expiry: spec.Expiry, db: spec.State}
	}
	return q
}

// startQuery opens the query endpoint and returns it; Run advertises.
func (h *Host) startQuery(specs []runner.ProcessorSpec) error {
	token, err := kafkasec.Secret(h.cfg.Query.Token).Resolve()
	if h.cfg.Query.Token == "" {
		token, err = "", nil
	}
	if err != nil {
		return fmt.Errorf("query.token: %w", err)
	}
	h.query = newQueryHost(h, h.cfg.AppID+"-"+instanceID(), specs)
	for _, m := range h.follower.Members() {
		h.query.dir.Apply(m)
	}
	h.querySrv, err = query.New(h.cfg.Query.Listen, token, h.query, h.log)
	if err != nil {
		return err
	}
	h.queryAddr = h.cfg.Query.Advertise
	if h.queryAddr == "" {
		h.queryAddr = "http://" + h.querySrv.Addr()
	}
	return nil
}

// onMember takes a member record from the follower.
func (h *Host) onMember(m control.Member, err error) {
	if err != nil {
		h.log.Warn("unreadable member record in the control topic", "member", m.Member, "err", err)
		return
	}
	if q := h.query; q != nil {
		q.dir.Apply(m)
	}
}

// advertise publishes this process's tasks until ctx ends (Run).
func (h *Host) advertise(ctx context.Context) {
	pub, err := control.NewPublisher(control.Config{Kafka: h.kafka, Topic: control.TopicName(h.cfg.AppID)})
	if err != nil {
		h.log.Error("query: no publisher for the member records; other processes will not redirect here", "err", err)
		return
	}
	defer pub.Close()
	query.Advertise(ctx, pub, h.query.member, h.queryAddr, h.query.tasks, advertiseInterval, h.log)
}

// tasks is the partitions of each queryable processor this process holds.
func (q *queryHost) tasks() map[string][]int32 {
	out := map[string][]int32{}
	for name, p := range q.procs {
		r := q.h.runnerOf(name)
		if r == nil {
			continue
		}
		for id := range r.Serving().Tasks {
			if id.Processor == name && id.Topic == p.topic {
				out[name] = append(out[name], id.Partition)
			}
		}
	}
	for name := range out {
		slices.Sort(out[name])
	}
	return out
}

func (q *queryHost) Processor(name string) (string, []string, bool) {
	p, ok := q.procs[name]
	return p.topic, p.stores, ok
}

func (q *queryHost) Partitions(ctx context.Context, topic string) (int, error) {
	q.partsMu.Lock()
	c, ok := q.parts[topic]
	q.partsMu.Unlock()
	if ok && time.Since(c.at) < partitionsTTL {
		return c.n, nil
	}
	q.admOnce.Do(func() {
		q.cl, q.admErr = kgo.NewClient(q.h.kafka.Opts()...)
		if q.admErr == nil {
			q.adm = kadm.NewClient(q.cl)
		}
	})
	if q.admErr != nil {
		return 0, q.admErr
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	td, err := q.adm.ListTopics(ctx, topic)
	if err == nil {
		err = td.Error()
	}
	if err != nil {
		return 0, err
	}
	n := len(td[topic].Partitions)
	if n == 0 {
		return 0, fmt.Errorf("topic %s has no partitions", topic)
	}
	q.partsMu.Lock()
	q.parts[topic] = cachedCount{n: n, at: time.Now()}
	q.partsMu.Unlock()
	return n, nil
}

func (q *queryHost) Task(processor string, partition int32) (held, ready bool, why string, gen any) {
	p, ok := q.procs[processor]
	r := q.h.runnerOf(processor)
	if !ok || r == nil {
		return false, false, "", nil
	}
	s := r.Serving()
	ready, held = s.Tasks[runner.TaskID{Processor: processor, Topic: p.topic, Partition: partition}]
	if held && !ready {
		why = "restoring its state, or stopped on a failure (see /healthz)"
	}
	return held, ready, why, s
}

func (q *queryHost) Get(processor string, partition int32, store string, key []byte) ([]byte, bool, int64, error) {
	p := q.procs[processor]
	v, found, cp, err := p.db.QueryGet(processor, partition, store, key)
	if err != nil || !found {
		return nil, false, cp, err
	}
	v, live := q.live(processor, p, partition, store, v)
	return v, live, cp, nil
}

func (q *queryHost) Scan(processor string, partition int32, store string, start, end []byte, limit, maxBytes int) ([]state.KV, bool, int64, error) {
	p := q.procs[processor]
	kvs, more, cp, err := p.db.QueryScan(processor, partition, store, start, end, limit, maxBytes)
	if err != nil {
		return nil, false, cp, err
	}
	if _, ok := p.expiry[store]; ok {
		n := 0
		for _, kv := range kvs {
			if v, live := q.live(processor, p, partition, store, kv.Value); live {
				kvs[n] = state.KV{Key: kv.Key, Value: v}
				n++
			}
		}
		kvs = kvs[:n]
	}
	return kvs, more, cp, nil
}

// live is a stored value as the plugin would read it: behind its expiry
// stamp for a store with an expiry, and not there once expired by the
// store's clock (the wall clock, or the task's stream time as of its
// latest commit point).
func (q *queryHost) live(processor string, p queryProc, partition int32, store string, stored []byte) ([]byte, bool) {
	e, ok := p.expiry[store]
	if !ok {
		return stored, true
	}
	now := time.Now().UnixMilli()
	if !e.Wall {
		now = math.MinInt64
		if r := q.h.runnerOf(processor); r != nil {
			tt, ok := r.TaskTimes(processor)[runner.TaskID{Processor: processor, Topic: p.topic, Partition: partition}]
			if ok && tt.StreamTime != abi.NoTime {
				now = tt.StreamTime
			}
		}
	}
	v, expired, ok := e.Live(stored, now)
	return v, ok && !expired
}

func (q *queryHost) Owner(processor string, partition int32) string {
	return q.dir.Owner(processor, partition, q.member)
}

// close releases the client of partition counts.
func (q *queryHost) close() {
	if q.cl != nil {
		q.cl.Close()
	}
}

// QueryAddr is the URL the interactive-query endpoint is advertised at,
// or "" when it is off.
func (h *Host) QueryAddr() string { return h.queryAddr }

// QueryResult is the answer Query got: the HTTP status and the JSON body
// of the query endpoint (docs/operations.md, "Interactive queries").
type QueryResult struct {
	Status int
	Body   []byte
}

// Query asks the running processes of cfg's app for key in store of
// processor (`wasmstream query`): it reads the processes' member records
// from the control topic, sends the key to the one holding its task
// (partition >= 0 names the task instead of the key's partition), and
// returns its answer. format and valueFormat are utf8 (""), hex or
// base64: key is given in format. log nil means slog.Default().
func Query(ctx context.Context, cfg *Config, processor, store, key, format, valueFormat string, partition int32, log *slog.Logger) (QueryResult, error) {
	app, err := cfg.deployApp(log)
	if err != nil {
		return QueryResult{}, err
	}
	c := cfg.Clone()
	c.ApplyDefaults()
	var pc *ProcessorConfig
	for i := range c.Processors {
		if c.Processors[i].Name == processor {
			pc = &c.Processors[i]
		}
	}
	if pc == nil {
		return QueryResult{}, fmt.Errorf("unknown processor %q", processor)
	}
	if len(pc.Stores)+len(pc.TaskTables) == 0 {
		return QueryResult{}, fmt.Errorf("processor %q has no stores", processor)
	}
	params := url.Values{}
	if format != "" {
		params.Set("format", format)
	}
	if valueFormat != "" {
		params.Set("value_format", valueFormat)
	}
	k, err := queryKey(key, format)
	if err != nil {
		return QueryResult{}, err
	}
	token := ""
	if c.Query.Token != "" {
		if token, err = kafkasec.Secret(c.Query.Token).Resolve(); err != nil {
			return QueryResult{}, fmt.Errorf("query.token: %w", err)
		}
	}
	if err := ideploy.NeedBrokers(app, "query"); err != nil {
		return QueryResult{}, err
	}
	if err := app.Reach(ctx); err != nil {
		return QueryResult{}, err
	}
	n := 0
	if partition < 0 {
		q := &queryHost{h: &Host{kafka: app.Kafka}, parts: map[string]cachedCount{}}
		defer q.close()
		if n, err = q.Partitions(ctx, c.runnerInputs(pc)[0]); err != nil {
			return QueryResult{}, err
		}
	}
	status, body, err := query.Ask(ctx, app.Kafka, c.AppID, processor, store, k, partition, n, params, token)
	return QueryResult{Status: status, Body: body}, err
}

// queryKey decodes a key given on the command line in format.
func queryKey(key, format string) ([]byte, error) {
	switch format {
	case "", "utf8":
		return []byte(key), nil
	case "hex":
		return hex.DecodeString(key)
	case "base64":
		return base64.StdEncoding.DecodeString(key)
	}
	return nil, fmt.Errorf("format %q: want utf8, hex or base64", format)
}
