package host

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/runner"
	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// State migration between versions (abi/ABI.md section 13), with the
// countjson / countmigrate pair: the first stores each count as JSON, the
// second in a binary layout, refusing a JSON count it finds (on_error:
// skip counts it), and migrates JSON to binary.

// jsonCounterPipeline is counterPipeline running countjson.
func jsonCounterPipeline(t *testing.T) *pipeline {
	p := newPipelineOn(t, testbroker.New(t), wasmbuild.Build(t, "./internal/testplugins/countjson"), OnErrorSkip)
	p.cfg.Processors[0].Stores = []string{"counts"}
	p.cfg.State.Dir = t.TempDir()
	// Under the race detector on a loaded machine, compiling a Go SDK
	// plugin at deploy took over the default minute.
	p.cfg.Runtime.CompileTimeout = 5 * time.Minute
	return p
}

// produceIDs produces the input ids from..to-1 as feed does (keys k0..k29).
func produceIDs(t *testing.T, p *pipeline, from, to int) {
	recs := make([]*kgo.Record, 0, to-from)
	for id := from; id < to; id++ {
		recs = append(recs, &kgo.Record{Topic: p.in, Key: []byte("k" + strconv.Itoa(id%30)), Value: []byte("id" + strconv.Itoa(id))})
	}
	p.b.Produce(t, recs...)
}

// A swap under load from countjson to countmigrate under exactly_once:
// every task migrates its JSON counts once, before the new version's first
// record (it refuses an unmigrated count: none is skipped), inside the
// swap's commit window; the counts continue across the swap exactly. A
// host that restores the state elsewhere afterwards finds it migrated and
// does not migrate again.
func TestMigrateJSONToBinaryUnderLoad(t *testing.T) {
	p := jsonCounterPipeline(t)
	old, v2, n, st := migrateUnderLoad(t, p)
	if st.Migrations == 0 || st.MigrationFailures != 0 || st.Skipped != 0 {
		t.Fatalf("migrations %d, failed %d, skipped records %d: want every task migrated before the new version's first record",
			st.Migrations, st.MigrationFailures, st.Skipped)
	}
	out := p.b.ReadCommitted(t, p.out, 30*time.Second)
	byVersion := checkCounts(t, out, n, map[string]int{old: 0, v2: 1})
	if byVersion[old] == 0 || byVersion[v2] == 0 {
		t.Fatalf("outputs by version %v: the swap did not happen under load", byVersion)
	}
	checkSwapsAtCommitPoints(t, p, out, old, v2)

	// Another process restores the migrated state from the changelogs: it
	// runs v2 on it without migrating again.
	p.cfg.State.Dir = t.TempDir()
	h2, stop2 := p.run(t)
	produceIDs(t, p, n, n+60)
	p.waitProcessed(t)
	st2, _ := h2.Stats("proc")
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	if st2.Migrations != 0 || st2.Skipped != 0 {
		t.Fatalf("after a restore of migrated state: %d migrations, %d skipped records; want none", st2.Migrations, st2.Skipped)
	}
	checkCounts(t, p.b.ReadCommitted(t, p.out, 30*time.Second), n+60, map[string]int{old: 0, v2: 1})
	t.Logf("%d inputs; outputs by version %v; %d tasks migrated", n, byVersion, st.Migrations)
}

// migrateUnderLoad runs p, deploys countmigrate as "v2" while input keeps
// coming, and stops once v2 processed 150 records and every input was:
// the old and new version, the inputs produced and the final stats.
func migrateUnderLoad(t *testing.T, p *pipeline) (old, v2 string, n int, st ProcessorStats) {
	t.Helper()
	h, stop := p.run(t)
	old = h.Versions()[0].Active.ID
	f := feed(t, p, 30, 10*time.Millisecond)
	waitRecordsIn(t, h, 150)
	v2 = deploy(t, p, wasmbuild.Build(t, "./internal/testplugins/countmigrate"), "v2")
	waitVersion(t, h, v2)
	st, _ = h.Stats("proc")
	waitRecordsIn(t, h, st.RecordsIn+150)
	n = f.end()
	p.waitProcessed(t)
	st, _ = h.Stats("proc")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	return old, v2, n, st
}

// State written by countjson is restored by a process that starts with
// countmigrate (deployed while no process ran): the task migrates when it
// opens, before its first record, and the counts continue.
func TestMigrateOnRestore(t *testing.T) {
	p := jsonCounterPipeline(t)
	h, stop := p.run(t)
	old := h.Versions()[0].Active.ID
	produceIDs(t, p, 0, 90)
	p.waitProcessed(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	v2 := deploy(t, p, wasmbuild.Build(t, "./internal/testplugins/countmigrate"), "v2")
	p.cfg.State.Dir = t.TempDir() // a failover: nothing local, all from the changelog
	h2, stop2 := p.run(t)
	if got := h2.Versions()[0].Active.ID; got != v2 {
		t.Fatalf("the new process runs %s, want %s", got, v2)
	}
	produceIDs(t, p, 90, 180)
	p.waitProcessed(t)
	st, _ := h2.Stats("proc")
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	if st.Migrations == 0 || st.Skipped != 0 {
		t.Fatalf("%d migrations, %d skipped records: want the restored JSON counts migrated before the first record", st.Migrations, st.Skipped)
	}
	checkCounts(t, p.b.ReadCommitted(t, p.out, 30*time.Second), 180, map[string]int{old: 0, v2: 1})
}

// A migration that fails (an error after writing the new layout, a trap,
// a loop past the time limit, writes past the state limit) rolls the swap
// back: no task runs the new version, its writes are gone (the old version
// goes on counting its JSON, which it would refuse to read otherwise),
// the rollback is counted and every input comes out once with its count.
func TestMigrateFailureRollsBack(t *testing.T) {
	for _, fail := range []string{"error", "trap", "loop", "bloat"} {
		t.Run(fail, func(t *testing.T) {
			p := jsonCounterPipeline(t)
			p.cfg.Processors[0].Config = map[string]any{"fail": fail}
			h, stop := p.run(t)
			old := h.Versions()[0].Active.ID
			f := feed(t, p, 30, 10*time.Millisecond)
			waitRecordsIn(t, h, 90)
			deploy(t, p, wasmbuild.Build(t, "./internal/testplugins/countmigratebad"), "bad")
			testutil.Eventually(t, 60*time.Second, func() error {
				if st, _ := h.Stats("proc"); st.MigrationFailures == 0 || st.Rollbacks == 0 {
					return fmt.Errorf("migration failures %d, rollbacks %d", st.MigrationFailures, st.Rollbacks)
				}
				return nil
			})
			waitVersion(t, h, old)
			st, _ := h.Stats("proc")
			waitRecordsIn(t, h, st.RecordsIn+90) // the old version goes on, on its own state
			n := f.end()
			p.waitProcessed(t)
			st, _ = h.Stats("proc")
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if st.Skipped != 0 || st.Migrations != 0 {
				t.Fatalf("%d skipped records, %d migrations: the failed migration left something", st.Skipped, st.Migrations)
			}
			checkCounts(t, p.b.ReadCommitted(t, p.out, 30*time.Second), n, map[string]int{old: 0})
		})
	}
}

// A first version that exports a migration, on fresh state, never
// migrates: there is no other version's layout to migrate from (it
// records its own). A restart with the same version does not migrate
// either.
func TestMigrateNotOnFreshState(t *testing.T) {
	p := newPipelineOn(t, testbroker.New(t), wasmbuild.Build(t, "./internal/testplugins/countmigrate"), OnErrorSkip)
	p.cfg.Processors[0].Stores = []string{"counts"}
	p.cfg.State.Dir = t.TempDir()
	var id string
	for round := range 2 {
		h, stop := p.run(t)
		id = h.Versions()[0].Active.ID
		produceIDs(t, p, 60*round, 60*(round+1))
		p.waitProcessed(t)
		st, _ := h.Stats("proc")
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if st.Migrations != 0 || st.MigrationFailures != 0 || st.Skipped != 0 {
			t.Fatalf("round %d: %d migrations, %d failed, %d skipped; want none", round, st.Migrations, st.MigrationFailures, st.Skipped)
		}
	}
	checkCounts(t, p.b.ReadCommitted(t, p.out, 30*time.Second), 120, map[string]int{id: 0})
}

// A migration that succeeds at the swap point, of a version whose canary
// then fails (a third of its records fail, in every task) under
// exactly_once: the window that holds the migration aborts, and with it
// the migration's writes and the record of the new version; the old
// version goes on with its JSON counts (it would refuse binary ones and
// skip the record), and every input comes out once, counted on without a
// gap. (A task whose first window of the new version failed nothing would
// commit its migration, and the version rolled back to would find the new
// layout: ABI.md section 13 says so, and why to keep the previous version
// able to read it.)
func TestMigrateAbortedWithCanary(t *testing.T) {
	p := jsonCounterPipeline(t)
	p.cfg.Processors[0].Config = map[string]any{"fail": "records"}
	p.cfg.Swap = SwapConfig{CanaryWindow: Set(30 * time.Second), MaxFailureRatio: Set(0.01), MinRecords: 1}
	h, stop := p.run(t)
	old := h.Versions()[0].Active.ID
	f := feed(t, p, 30, 10*time.Millisecond)
	waitRecordsIn(t, h, 90)
	bad := deploy(t, p, wasmbuild.Build(t, "./internal/testplugins/countmigratebad"), "bad")
	testutil.Eventually(t, 60*time.Second, func() error {
		if st, _ := h.Stats("proc"); st.Rollbacks == 0 {
			return fmt.Errorf("no rollback yet: %+v", h.Versions())
		}
		return nil
	})
	waitVersion(t, h, old)
	st, _ := h.Stats("proc")
	waitRecordsIn(t, h, st.RecordsIn+150)
	n := f.end()
	p.waitProcessed(t)
	st, _ = h.Stats("proc")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if st.Migrations == 0 {
		t.Fatalf("no migration ran: the test did not reach the aborted migration (stats %+v)", st)
	}
	out := p.b.ReadCommitted(t, p.out, 30*time.Second)
	checkCounts(t, out, n, map[string]int{old: 0, bad: 0})
	for _, o := range out {
		if headerOf(o, runner.HeaderVersion) == bad {
			t.Fatalf("output %s of the rolled-back version was committed", o.Value)
		}
	}
}

// The swap and migration under at_least_once: every task migrates before
// the new version's first record (none is skipped) and, with no crash or
// abort, every input still comes out once with its count.
func TestMigrateAtLeastOnce(t *testing.T) {
	p := jsonCounterPipeline(t)
	p.cfg.Guarantee = AtLeastOnce
	old, v2, n, st := migrateUnderLoad(t, p)
	if st.Migrations == 0 || st.Skipped != 0 {
		t.Fatalf("%d migrations, %d skipped records", st.Migrations, st.Skipped)
	}
	checkCounts(t, p.b.ReadCommitted(t, p.out, 30*time.Second), n, map[string]int{old: 0, v2: 1})
}
