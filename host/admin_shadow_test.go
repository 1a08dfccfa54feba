package host

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/testutil"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// GET /v1/processors/{name}/shadow on a running host: a shadow candidate
// that differs for a known subset of keys (counterdiff: keys ending in 7)
// is reported with exactly the records of those keys as its samples, each
// naming its input topic, partition and offset, and no record contents.
func TestShadowAdminEndpoint(t *testing.T) {
	p := newPipeline(t, wasmbuild.Build(t, "./internal/testplugins/counter"), OnErrorFail)
	p.cfg.Processors[0].Stores = []string{"counts"}
	p.cfg.State.Dir = t.TempDir()
	p.cfg.Processors[0].Shadow = wasmbuild.Build(t, "./internal/testplugins/counterdiff")
	p.cfg.Admin.Listen = "127.0.0.1:0"
	h, stop := p.run(t)
	base := "http://" + h.AdminAddr()
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	// Before any record: the run is there, with nothing compared.
	testutil.Eventually(t, 60*time.Second, func() error {
		if code, body := httpGet(t, base+"/v1/processors/proc/shadow"); code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	// Where each input record is, and its key.
	keyAt := map[string]string{}
	type sample struct {
		Task      string         `json:"task"`
		Topic     string         `json:"topic"`
		Partition int32          `json:"partition"`
		Offset    int64          `json:"offset"`
		Active    map[string]any `json:"active"`
		Candidate map[string]any `json:"candidate"`
	}
	var doc struct {
		Processor string `json:"processor"`
		Running   bool   `json:"running"`
		Version   string `json:"version"`
		Total     struct {
			Records, Matches, Differences, Failures int64
		} `json:"total"`
		SamplesTaken int      `json:"samples_taken"`
		Samples      []sample `json:"samples"`
	}
	// Its instance starts beside the active path (a slow start, under
	// -race on a loaded machine, leaves the first records uncompared):
	// rounds of 30 keys go in until it compared two rounds' worth.
	var body string
	testutil.Eventually(t, 120*time.Second, func() error {
		keys := make([]string, 30)
		for i := range keys {
			keys[i] = "k" + strconv.Itoa(i)
		}
		p.produce(t, keys...)
		p.waitProcessed(t)
		var code int
		code, body = httpGet(t, base+"/v1/processors/proc/shadow")
		if code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			return err
		}
		if doc.Total.Records < 60 {
			return fmt.Errorf("compared %d records: %s", doc.Total.Records, body)
		}
		return nil
	})
	for _, r := range p.b.ReadCommitted(t, p.in, 30*time.Second) {
		keyAt[fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)] = string(r.Key)
	}
	if !doc.Running || doc.Processor != "proc" || !strings.HasPrefix(doc.Version, "config-shadow@") || doc.Total.Failures != 0 {
		t.Fatalf("shadow: %s", body)
	}
	if doc.Total.Differences == 0 || int64(len(doc.Samples)) != doc.Total.Differences || doc.SamplesTaken != len(doc.Samples) {
		t.Fatalf("%d differences, %d samples (%d taken): %s", doc.Total.Differences, len(doc.Samples), doc.SamplesTaken, body)
	}
	var seen []string
	for _, s := range doc.Samples {
		k, ok := keyAt[fmt.Sprintf("%s/%d/%d", s.Topic, s.Partition, s.Offset)]
		if !ok || !strings.HasSuffix(k, "7") {
			t.Errorf("sample at %s/%d/%d (key %q): only the keys ending in 7 differ", s.Topic, s.Partition, s.Offset, k)
		}
		seen = append(seen, k)
		for _, side := range []map[string]any{s.Active, s.Candidate} {
			emits, _ := side["emits"].([]any)
			if side["count"] != 1.0 || len(emits) != 1 {
				t.Fatalf("a side of the sample of %q: %v", k, side)
			}
			e := emits[0].(map[string]any)
			if _, has := e["value"]; has || e["value_len"] == nil || e["output"] == nil {
				t.Fatalf("an emit of the sample of %q: %v (no contents, its lengths)", k, e)
			}
		}
	}
	sort.Strings(seen)
	t.Logf("%d of %d compared records differ: keys %v", doc.Total.Differences, doc.Total.Records, seen)
}
