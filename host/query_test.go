package host

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/query"
	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

const queryToken = "q-token-for-tests"

// queryPipeline is a statecounter pipeline (an 8-byte little-endian count
// per key in the store "counts") with the query endpoint on.
func queryPipeline(t *testing.T) *pipeline {
	p := newPipeline(t, engineTestdata("statecounter"), OnErrorFail)
	p.cfg.Processors[0].Stores = []string{"counts"}
	p.cfg.Query = QueryConfig{Listen: "127.0.0.1:0", Token: queryToken}
	p.cfg.ApplyDefaults()
	if err := p.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

// runIn runs a process of p with its own state directory.
func (p *pipeline) runIn(t *testing.T, dir string) (*Host, func() error) {
	cfg := p.cfg
	c := *p.cfg
	c.State.Dir = dir
	p.cfg = &c
	defer func() { p.cfg = cfg }()
	return p.run(t)
}

// queryClient follows redirects with the token.
func queryClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) > 3 {
			return fmt.Errorf("%d redirects", len(via))
		}
		req.Header.Set("Authorization", "Bearer "+queryToken)
		return nil
	}}
}

// ask GETs path on base and decodes the JSON answer into out.
func ask(c *http.Client, base, path string, out any) (int, http.Header, error) {
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+queryToken)
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, resp.Header, err
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(body, out); err != nil {
			return resp.StatusCode, resp.Header, fmt.Errorf("%v: %s", err, body)
		}
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, resp.Header, fmt.Errorf("%s: %s", resp.Status, body)
	}
	return resp.StatusCode, resp.Header, nil
}

// Three processes, keys over every partition: every key is answered with
// its committed count through every process (the ones that do not hold
// its task redirect to the one that does), scans page through a task, and
// a query without the token is refused.
func TestQueryEveryKeyThroughEveryProcess(t *testing.T) {
	p := queryPipeline(t)
	const keys = 60
	want := map[string]uint64{}
	var recs []*kgo.Record
	for i := range keys {
		k := "key-" + strconv.Itoa(i)
		for range i%4 + 1 {
			recs = append(recs, &kgo.Record{Topic: p.in, Key: []byte(k), Value: []byte("v")})
			want[k]++
		}
	}
	p.b.Produce(t, recs...)
	var hosts []*Host
	var stops []func() error
	for range 3 {
		h, stop := p.runIn(t, t.TempDir())
		hosts, stops = append(hosts, h), append(stops, stop)
	}
	p.waitProcessed(t)
	perPartition := map[int32]int{}
	for k := range want {
		perPartition[query.KeyPartition([]byte(k), 3)]++
	}
	if len(perPartition) != 3 {
		t.Fatalf("the keys fall on partitions %v, want all 3", perPartition)
	}
	c := queryClient()
	everyKey := func(i int, h *Host) {
		t.Helper()
		testutil.Eventually(t, 90*time.Second, func() error {
			for k, n := range want {
				var a query.Answer
				if _, _, err := ask(c, h.QueryAddr(), "/v1/stores/proc/counts/keys/"+url.PathEscape(k)+"?value_format=hex", &a); err != nil {
					return fmt.Errorf("process %d, key %s: %v", i, k, err)
				}
				v, _ := hex.DecodeString(a.Value)
				if !a.Found || len(v) != 8 || binary.LittleEndian.Uint64(v) != n || a.Checkpoint <= 0 {
					return fmt.Errorf("process %d, key %s: %+v, want the count %d", i, k, a, n)
				}
			}
			return nil
		})
	}
	for i, h := range hosts {
		everyKey(i, h)
	}
	// A key no record had: 404, found false.
	if code, _, _ := ask(c, hosts[0].QueryAddr(), "/v1/stores/proc/counts/keys/nothing", nil); code != http.StatusNotFound {
		t.Errorf("a missing key: %d, want 404", code)
	}
	// Scans, seven items a page, through process 1 for every partition
	// (a late rebalance answers 503 meanwhile: asked again).
	for part, n := range perPartition {
		testutil.Eventually(t, 60*time.Second, func() error {
			got, from := 0, ""
			for page := 0; ; page++ {
				var a query.ScanAnswer
				path := "/v1/stores/proc/counts/keys?partition=" + strconv.Itoa(int(part)) + "&limit=7&value_format=hex"
				if from != "" {
					path += "&from=" + url.QueryEscape(from)
				}
				if _, _, err := ask(c, hosts[1].QueryAddr(), path, &a); err != nil {
					return fmt.Errorf("scan of partition %d: %v", part, err)
				}
				got += len(a.Items)
				if !a.More {
					break
				}
				from = a.Next
				if page > keys {
					t.Fatal("the scan does not end")
				}
			}
			if got != n {
				t.Fatalf("partition %d: the scan found %d keys, want %d", part, got, n)
			}
			return nil
		})
	}
	resp, err := http.Get(hosts[2].QueryAddr() + "/v1/stores/proc/counts/keys/key-1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a query without the token: %d, want 401", resp.StatusCode)
	}
	// Process 2 leaves while the counts grow: its tasks move to the
	// others (a rebalance and a restore). Meanwhile a reader asks every
	// key through processes 0 and 1 over and over: an answer may be a 503,
	// never a count below one answered before (stale state). Then every
	// key is answered through each of them again.
	stopReading := make(chan struct{})
	readErr := make(chan error, 1)
	var answered, unavailable int
	keyList := slices.Collect(maps.Keys(want))
	go func() {
		last := map[string]uint64{}
		for round := 0; ; round++ {
			for _, k := range keyList {
				select {
				case <-stopReading:
					readErr <- nil
					return
				default:
				}
				var a query.Answer
				code, _, _ := ask(c, hosts[round%2].QueryAddr(), "/v1/stores/proc/counts/keys/"+url.PathEscape(k)+"?value_format=hex", &a)
				if code != http.StatusOK {
					unavailable++
					continue
				}
				answered++
				v, _ := hex.DecodeString(a.Value)
				if len(v) != 8 || binary.LittleEndian.Uint64(v) < last[k] {
					readErr <- fmt.Errorf("key %s: answered %+v after a count of %d", k, a, last[k])
					return
				}
				last[k] = binary.LittleEndian.Uint64(v)
			}
		}
	}()
	recs = recs[:0]
	for k := range want {
		recs = append(recs, &kgo.Record{Topic: p.in, Key: []byte(k), Value: []byte("v")})
		want[k]++
	}
	p.b.Produce(t, recs...)
	if err := stops[2](); err != nil {
		t.Fatal(err)
	}
	p.waitProcessed(t)
	for i, h := range hosts[:2] {
		everyKey(i, h)
	}
	close(stopReading)
	if err := <-readErr; err != nil {
		t.Fatal(err)
	}
	t.Logf("during the rebalance: %d answers, %d unavailable", answered, unavailable)
	// Through the CLI's path too: the member records alone find the task.
	res, err := Query(depCtx(t), p.cfg, "proc", "counts", "key-3", "", "hex", -1, testLogger(t))
	if err != nil || res.Status != http.StatusOK || !strings.Contains(string(res.Body), `"value":"0500000000000000"`) {
		t.Errorf("Query: %d %s %v, want key-3's count 5", res.Status, res.Body, err)
	}
}

// A task that restores its state answers 503 with Retry-After, and its
// committed counts once restored.
func TestQueryRestoringTaskAnswers503(t *testing.T) {
	p := queryPipeline(t)
	p.produce(t, "a", "a", "b")
	_, stop := p.runIn(t, t.TempDir())
	p.waitProcessed(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// A new state directory: the tasks restore, and the restore waits
	// for the test.
	release := make(chan struct{})
	var once sync.Once
	p.opts = append(p.opts, WithRestoreProgress(func(RestoreProgress) { <-release }))
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	h, stop := p.runIn(t, t.TempDir())
	c := queryClient()
	testutil.Eventually(t, 60*time.Second, func() error {
		code, hdr, err := ask(c, h.QueryAddr(), "/v1/stores/proc/counts/keys/a", nil)
		if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
			return fmt.Errorf("%d %v, want 503 with Retry-After", code, err)
		}
		return nil
	})
	once.Do(func() { close(release) })
	testutil.Eventually(t, 60*time.Second, func() error {
		var a query.Answer
		if _, _, err := ask(c, h.QueryAddr(), "/v1/stores/proc/counts/keys/a?value_format=hex", &a); err != nil {
			return err
		}
		if a.Value != "0200000000000000" {
			return fmt.Errorf("%+v, want the count 2", a)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A store with an expiry answers as the plugin reads it: the value behind
// its stamp, and nothing once expired by the store's clock.
func TestQueryHidesExpiredValues(t *testing.T) {
	q := &queryHost{h: &Host{}, procs: map[string]queryProc{}}
	p := queryProc{topic: "in", expiry: map[string]state.Expiry{
		"wall":  {TTL: time.Hour.Milliseconds(), Wall: true},
		"event": {TTL: 1},
	}}
	stamped := func(ms int64, v string) []byte {
		return append(binary.BigEndian.AppendUint64(nil, uint64(ms)), v...)
	}
	now := time.Now().UnixMilli()
	for _, c := range []struct {
		store string
		value []byte
		want  string
		live  bool
	}{
		{"plain", []byte("v"), "v", true},
		{"wall", stamped(now-time.Minute.Milliseconds(), "fresh"), "fresh", true},
		{"wall", stamped(now-2*time.Hour.Milliseconds(), "old"), "", false},
		// No task holds a stream time here: nothing has expired by it.
		{"event", stamped(0, "no-clock"), "no-clock", true},
		{"wall", []byte("short"), "", false},
	} {
		v, live := q.live("proc", p, 0, c.store, c.value)
		if live != c.live || (live && string(v) != c.want) {
			t.Errorf("%s %q: %q %v, want %q %v", c.store, c.value, v, live, c.want, c.live)
		}
	}
}
