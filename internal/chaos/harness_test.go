//go:build unix

package chaos

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/wasmbuild"
)

// The shape every test app shares.
const (
	inputPartitions = 6
	numKeys         = 50
	commitInterval  = 50 * time.Millisecond
	// sessionTimeout is the smallest both brokers accept: the real broker's
	// group.min.session.timeout.ms defaults to 6 s (scripts/kafka.sh keeps
	// it), and kfake's minimum is the same.
	sessionTimeout = 6 * time.Second
	// txnTimeout is the transaction timeout: how long the open transaction
	// of a killed or stopped process holds its partitions (the broker
	// aborts it then; scripts/kafka.sh checks every second). It is above
	// the session timeout because a live member's transaction can stay
	// open through a whole rebalance that waits for a dead member's session
	// to expire, and a broker-side abort then fences the live member (see
	// TestSurvivorsOfACrashKeepRunning); rebalances that follow each other
	// can still outlast it.
	txnTimeout = 10 * time.Second
	// stopBound is how long a process may take to exit after SIGTERM.
	stopBound = 30 * time.Second
	// killBound is how long a process may take to be reaped after SIGKILL.
	killBound = 10 * time.Second
)

// workDir holds the binary and the compiled-module cache shared by every
// child process of this test process.
var workDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wasmstream-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	workDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// wasmstreamBinary builds ./cmd/wasmstream once per test process.
func wasmstreamBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() { binPath, binErr = buildBinary() })
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func buildBinary() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root, err := wasmbuild.ModuleRoot(ctx)
	if err != nil {
		return "", err
	}
	out := filepath.Join(workDir, "wasmstream")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/wasmstream")
	cmd.Dir = root
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/wasmstream (in %s): %v\n%s", root, err, output)
	}
	if err := consultSources(ctx, root, "./cmd/wasmstream"); err != nil {
		return "", err
	}
	return out, nil
}

// consultSources stats every Go file of the module the binary is built
// from. The binary is built in a subprocess, so without this go test would
// serve a cached result after a change to the host (the same trick as
// internal/wasmbuild).
func consultSources(ctx context.Context, root, pkg string) error {
	const format = `{{if .Module}}{{if .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{end}}{{end}}`
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-f", format, pkg)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list -deps %s: %v\n%s", pkg, err, stderr.String())
	}
	files := append(strings.Split(strings.TrimSpace(string(out)), "\n"), filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum"))
	for _, f := range files {
		os.Stat(f) // the consultation is what counts
	}
	return nil
}

// childEnv is the environment of a wasmstream process: ours without any
// WASMSTREAM_ variable (the config loader reads every one of them, and
// WASMSTREAM_TEST_BROKERS would be an unknown field), with full tracebacks
// so a SIGQUIT to a hung process dumps every goroutine into its log.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WASMSTREAM_") && !strings.HasPrefix(kv, "GOTRACEBACK=") {
			env = append(env, kv)
		}
	}
	return append(env, "GOTRACEBACK=all")
}

// harness is one app under test: its topics, its member slots (each with
// its own config and state directory, reused across restarts) and every
// process it started.
type harness struct {
	t           *testing.T
	b           *testbroker.Broker
	adm         *kadm.Client
	guarantee   string
	appID       string
	in, out     string
	in2         string // the second input topic (input 1), "" for an app with one input
	dir         string
	bin         string
	plugin      string
	rng         *rand.Rand
	deadline    time.Time // the test's hard deadline
	members     []*member
	procs       []*proc // every process started, in order
	started     time.Time
	txnTimeout  time.Duration // kafka.transaction_timeout of every member
	sessTimeout time.Duration // kafka.session_timeout of every member
	stateSync   time.Duration // state.sync_interval of every member
	standbys    int           // state.standby_replicas of every member
	kills       int
	terms       int
	restarts    int
	producerMu  sync.Mutex
	prod        *kgo.Client
	inputs      []input // acknowledged input records
	nextID      int
	app         app
	// eventTime, if set, gives each input record its timestamp (ms; called
	// with producerMu held, with the harness's rng); otherwise the producer
	// stamps them.
	eventTime func(*rand.Rand) int64
	// records, if set, makes the input records for n new ids in place of
	// the default (one record each to h.in, keys from numKeys); it may
	// return more or fewer records than n, to any input topic. Called with
	// producerMu held.
	records func(h *harness, n int) []*kgo.Record
}

// app is the processor every member runs: the counter test plugin by
// default.
type app struct {
	processor string            // the processor's name
	pkg       string            // its plugin's package, built with wasmbuild
	store     string            // its one store
	output    string            // its output's name, mapped to the output topic
	config    map[string]string // its config (none if empty)
	// timeStore: waitSettled and checkLocalStores include the processor's
	// time store (_time.<processor>) and its changelog.
	timeStore bool
	// secondInput, if set, names (as a prefix) a second input topic of the
	// same partition count: the processor's input 1, co-partitioned with
	// input 0 (h.in) since the processor has a store.
	secondInput string
}

var counterApp = app{processor: "counter", pkg: "./internal/testplugins/counter", store: "counts", output: "out"}

// member is a slot: the same name, config and state directory across the
// processes that fill it one after another.
type member struct {
	h        *harness
	name     string
	cfgPath  string
	stateDir string
	logPath  string
	cur      *proc // the latest process of this slot, nil before the first
}

// proc is one `wasmstream run` process.
type proc struct {
	m       *member
	run     int
	cmd     *exec.Cmd
	start   time.Time
	logFrom int64         // where this run's lines start in the slot log
	isUp    bool          // it logged that it runs (cached by up)
	done    chan struct{} // closed when the process has been reaped
	state   *os.ProcessState
	waitErr error
	end     time.Time
	// Set by the test goroutine only.
	sent      []string  // signals sent, in order
	stopping  bool      // we sent SIGTERM or SIGKILL: its exit is expected
	termAt    time.Time // when SIGTERM was sent (zero: never)
	allowExit bool      // it may exit on its own (a fenced zombie)
	judged    bool      // its SIGTERM exit was checked
}

// option changes a harness before its members' configs are written.
type option func(*harness)

// withTxnTimeout sets kafka.transaction_timeout (default txnTimeout).
func withTxnTimeout(d time.Duration) option { return func(h *harness) { h.txnTimeout = d } }

// withStateSync sets state.sync_interval (default 1s, the host's default).
func withStateSync(d time.Duration) option { return func(h *harness) { h.stateSync = d } }

// withStandbys sets state.standby_replicas (default 0).
func withStandbys(n int) option { return func(h *harness) { h.standbys = n } }

// withApp runs another processor than the counter.
func withApp(a app) option { return func(h *harness) { h.app = a } }

// withEventTime stamps every input record with ts(rng) (ms).
func withEventTime(ts func(*rand.Rand) int64) option { return func(h *harness) { h.eventTime = ts } }

// withRecords makes the input records with gen (see harness.records).
func withRecords(gen func(h *harness, n int) []*kgo.Record) option {
	return func(h *harness) { h.records = gen }
}

func newHarness(t *testing.T, guarantee string, members int, hardDeadline time.Duration, opts ...option) *harness {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("WASMSTREAM_CHAOS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (WASMSTREAM_CHAOS_SEED=%d repeats the schedule)", seed, seed)
	b := testbroker.New(t)
	h := &harness{
		t:           t,
		b:           b,
		adm:         b.Admin(t),
		guarantee:   guarantee,
		appID:       b.Name(t, "app"),
		in:          b.Name(t, "in"),
		out:         b.Name(t, "out"),
		dir:         t.TempDir(),
		bin:         wasmstreamBinary(t),
		rng:         rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		deadline:    time.Now().Add(hardDeadline),
		started:     time.Now(),
		txnTimeout:  txnTimeout,
		sessTimeout: sessionTimeout,
		stateSync:   time.Second,
		app:         counterApp,
	}
	for _, o := range opts {
		o(h)
	}
	if h.app.secondInput != "" {
		h.in2 = b.Name(t, h.app.secondInput)
	}
	h.plugin = wasmbuild.Build(t, h.app.pkg)
	for _, in := range h.inTopics() {
		b.CreateTopic(t, in, inputPartitions, nil)
	}
	b.CreateTopic(t, h.out, inputPartitions, nil)
	h.prod = b.Client(t, kgo.MetadataMinAge(250*time.Millisecond))
	for i := range members {
		m := &member{h: h, name: "m" + strconv.Itoa(i)}
		m.stateDir = filepath.Join(h.dir, m.name, "state")
		m.cfgPath = filepath.Join(h.dir, m.name, "pipeline.yaml")
		m.logPath = filepath.Join(h.dir, m.name+".log")
		if err := os.MkdirAll(m.stateDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(m.cfgPath, []byte(h.config(m)), 0o644); err != nil {
			t.Fatal(err)
		}
		h.members = append(h.members, m)
	}
	// Registered after testbroker.New and t.TempDir, so these run first:
	// the logs are still there and the broker still up.
	t.Cleanup(h.cleanup)
	return h
}

func (h *harness) config(m *member) string {
	quoted := make([]string, 0, len(h.b.Addrs()))
	for _, a := range h.b.Addrs() {
		quoted = append(quoted, strconv.Quote(a))
	}
	return fmt.Sprintf(`app_id: %s
guarantee: %s
kafka:
  brokers: [%s]
  client_id: %s
  commit_interval: %s
  session_timeout: %s
  transaction_timeout: %s
state:
  dir: %s
  sync_interval: %s
  standby_replicas: %d
runtime:
  cache_dir: %s
log:
  level: %s
processors:
  - name: %s
    plugin: %s
    inputs: [%s]
    outputs: {%s: %s}
    stores: [%s]
%s`, h.appID, h.guarantee, strings.Join(quoted, ", "), m.name, commitInterval, h.sessTimeout, h.txnTimeout,
		strconv.Quote(m.stateDir), h.stateSync, h.standbys, strconv.Quote(filepath.Join(workDir, "wasm-cache")), logLevel(),
		h.app.processor, strconv.Quote(h.plugin), strings.Join(h.inTopics(), ", "), h.app.output, h.out, h.app.store, h.app.configYAML())
}

// inTopics are the app's input topics, input 0 first.
func (h *harness) inTopics() []string {
	if h.in2 != "" {
		return []string{h.in, h.in2}
	}
	return []string{h.in}
}

// configYAML is the processor's config section ("" without one).
func (a app) configYAML() string {
	if len(a.config) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("    config:\n")
	for _, k := range slices.Sorted(maps.Keys(a.config)) {
		fmt.Fprintf(&b, "      %s: %s\n", k, strconv.Quote(a.config[k]))
	}
	return b.String()
}

// logLevel is the child processes' log level: info, or
// WASMSTREAM_CHAOS_LOG_LEVEL (debug includes franz-go's own logs).
func logLevel() string {
	if l := os.Getenv("WASMSTREAM_CHAOS_LOG_LEVEL"); l != "" {
		return l
	}
	return "info"
}

// changelog is the app's store's changelog topic.
func (h *harness) changelog() string { return h.storeChangelog(h.app.store) }

func (h *harness) storeChangelog(store string) string { return h.appID + "-" + store + "-changelog" }

// timeStore is the name of the processor's time store.
func (h *harness) timeStore() string { return "_time." + h.app.processor }

// changelogs are the changelog topics waitSettled watches: the store's,
// and the time store's if the app says so.
func (h *harness) changelogs() []string {
	if h.app.timeStore {
		return []string{h.changelog(), h.storeChangelog(h.timeStore())}
	}
	return []string{h.changelog()}
}

// checkDeadline fails the test once its hard deadline has passed.
func (h *harness) checkDeadline(phase string) {
	h.t.Helper()
	if time.Now().After(h.deadline) {
		h.t.Fatalf("hard deadline exceeded (%v after the start) while %s", time.Since(h.started).Round(time.Second), phase)
	}
}

// sleep waits d, or fails the test if that would pass its hard deadline.
func (h *harness) sleep(d time.Duration) {
	h.t.Helper()
	if time.Now().Add(d).After(h.deadline) {
		h.t.Fatalf("hard deadline: a %v wait would pass it", d)
	}
	time.Sleep(d)
}

// jitter returns a duration uniformly in [lo, hi).
func (h *harness) jitter(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(h.rng.Int64N(int64(hi-lo)))
}

// ---- processes ----

func (m *member) running() bool { return m.cur != nil && !m.cur.exited() && !m.cur.stopping }

// startable: no process of this slot is alive (the state directory is
// locked by the live one).
func (m *member) startable() bool { return m.cur == nil || m.cur.exited() }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) String() string {
	return fmt.Sprintf("%s run %d (pid %d)", p.m.name, p.run, p.cmd.Process.Pid)
}

// status describes how the process ended: "exit 0", "exit 1", "signal: killed".
func (p *proc) status() string {
	if p.state == nil {
		if p.waitErr != nil {
			return p.waitErr.Error()
		}
		return "running"
	}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "signal: " + ws.Signal().String()
	}
	return "exit " + strconv.Itoa(p.state.ExitCode())
}

func (p *proc) exitCode() int {
	if p.state == nil {
		return -1
	}
	return p.state.ExitCode()
}

// start starts a new process in slot m. The slot must be startable.
func (m *member) start() *proc {
	h := m.h
	h.t.Helper()
	if !m.startable() {
		h.t.Fatalf("%s: start while %s is alive", m.name, m.cur)
	}
	run := 1
	if m.cur != nil {
		run = m.cur.run + 1
		h.restarts++
	}
	f, err := os.OpenFile(m.logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		h.t.Fatal(err)
	}
	fmt.Fprintf(f, "=== chaos: %s run %d starts at %s ===\n", m.name, run, time.Now().Format("15:04:05.000"))
	from, _ := f.Seek(0, io.SeekCurrent)
	cmd := exec.Command(h.bin, "run", "-c", m.cfgPath)
	cmd.Env = childEnv()
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	f.Close()
	if err != nil {
		h.t.Fatalf("%s: starting %s: %v", m.name, h.bin, err)
	}
	p := &proc{m: m, run: run, cmd: cmd, start: time.Now(), logFrom: from, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		p.state = cmd.ProcessState
		p.end = time.Now()
		if f, err := os.OpenFile(m.logPath, os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(f, "=== chaos: %s run %d ended at %s: %s ===\n", m.name, run, p.end.Format("15:04:05.000"), p.status())
			f.Close()
		}
		close(p.done)
	}()
	m.cur = p
	h.procs = append(h.procs, p)
	return p
}

// up reports whether the process has got past its start-up: the host is
// built, its plugin loaded and its topics checked, and it logged
// "running". A SIGTERM before that is a different case (the signal
// handler may not even be installed yet), which the tests do not send.
func (p *proc) up() bool {
	if p.isUp {
		return true
	}
	f, err := os.Open(p.m.logPath)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.Seek(p.logFrom, io.SeekStart); err != nil {
		return false
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "msg=running") {
			p.isUp = true
			return true
		}
		if strings.HasPrefix(sc.Text(), "=== chaos: ") && strings.Contains(sc.Text(), " ended at ") {
			break
		}
	}
	return false
}

// waitUp waits up to bound for the process to be up.
func (p *proc) waitUp(bound time.Duration) bool {
	deadline := time.Now().Add(bound)
	for !p.up() {
		if p.exited() || time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// dump makes a hung process write every goroutine's stack to its log
// (SIGQUIT with GOTRACEBACK=all; the process then exits 2) and waits for
// it, killing it if it does not go.
func (p *proc) dump() {
	p.stopping = true
	p.signal(syscall.SIGQUIT)
	if !p.wait(5 * time.Second) {
		p.signal(syscall.SIGKILL)
		p.wait(killBound)
	}
}

func (p *proc) signal(sig syscall.Signal) {
	p.sent = append(p.sent, sig.String())
	_ = p.cmd.Process.Signal(sig)
}

// wait waits up to d for the process to be reaped.
func (p *proc) wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// kill SIGKILLs the slot's process and waits until it is reaped.
func (m *member) kill() {
	h := m.h
	h.t.Helper()
	p := m.cur
	p.stopping = true
	p.signal(syscall.SIGKILL)
	h.kills++
	if !p.wait(killBound) {
		h.t.Fatalf("%s not reaped %v after SIGKILL", p, killBound)
	}
}

// term sends SIGTERM; the exit is judged later by judgeStops.
func (m *member) term() {
	p := m.cur
	p.stopping = true
	p.termAt = time.Now()
	p.signal(syscall.SIGTERM)
	m.h.terms++
}

// judgeStops checks every SIGTERMed process whose bound has passed (or,
// with all, waits for every one up to its bound): it must have exited 0 in
// time. A process still running past its bound gets SIGQUIT (its
// goroutines go to its log) and then SIGKILL.
func (h *harness) judgeStops(all bool) {
	h.t.Helper()
	for _, p := range h.procs {
		if p.judged || p.termAt.IsZero() {
			continue
		}
		left := time.Until(p.termAt.Add(stopBound))
		if !all && left > 0 && !p.exited() {
			continue
		}
		p.judged = true
		if !p.wait(max(left, 0)) {
			h.t.Errorf("%s did not exit within %v of SIGTERM; sending SIGQUIT (goroutine dump in its log), then SIGKILL", p, stopBound)
			p.dump()
			continue
		}
		if p.exitCode() != 0 {
			h.t.Errorf("%s exited with %s after SIGTERM, want exit 0 (a clean stop); log tail:\n%s", p, p.status(), p.logTail(25))
		}
	}
}

// unexpectedExits reports processes that ended without being asked to.
func (h *harness) unexpectedExits() []*proc {
	var out []*proc
	for _, p := range h.procs {
		if p.exited() && !p.stopping && !p.allowExit {
			out = append(out, p)
		}
	}
	return out
}

// failOnUnexpectedExits fails the test if a process ended on its own.
func (h *harness) failOnUnexpectedExits() {
	h.t.Helper()
	for _, p := range h.unexpectedExits() {
		if !p.judged {
			p.judged = true
			h.t.Errorf("%s exited on its own with %s; log tail:\n%s", p, p.status(), p.logTail(30))
		}
	}
}

// restartDead restarts, as a supervisor would, every slot whose process
// ended on its own (failOnUnexpectedExits has reported it), so one
// failure does not leave the rest of a test a member short.
func (h *harness) restartDead() {
	h.t.Helper()
	h.failOnUnexpectedExits()
	for _, m := range h.members {
		if p := m.cur; p != nil && p.exited() && !p.stopping && !p.allowExit {
			h.t.Logf("restarting %s after %s ended on its own", m.name, p)
			m.start()
		}
	}
}

// stopAll SIGTERMs every live process and checks each exits 0 in time.
// startGroup starts every member and waits until the group is stable with
// n members sharing the input partitions.
func (h *harness) startGroup(n int) {
	h.t.Helper()
	for _, m := range h.members {
		m.start()
	}
	h.waitGroup(n, 60*time.Second)
}

// finish stops every member, fails on an exit nobody asked for, checks the
// committed output and state (exactly once or at least once) and logs the
// run's summary.
func (h *harness) finish(exactlyOnce bool) {
	h.t.Helper()
	h.stopAll()
	h.failOnUnexpectedExits()
	h.check(exactlyOnce)
	h.summary()
}

func (h *harness) stopAll() {
	h.t.Helper()
	start := time.Now()
	for _, m := range h.members {
		if m.running() {
			if !m.cur.waitUp(30*time.Second) && !m.cur.exited() {
				h.t.Errorf("%s did not start within 30s; log tail:\n%s", m.cur, m.cur.logTail(20))
			}
			m.term()
		}
	}
	h.judgeStops(true)
	h.t.Logf("stop: every process exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
}

// logTail returns the last n lines of the process's slot log.
func (p *proc) logTail(n int) string { return tail(p.m.logPath, n) }

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// cleanup kills whatever is still running, prints the logs' tails if the
// test failed and keeps the logs if WASMSTREAM_CHAOS_LOGS names a directory.
func (h *harness) cleanup() {
	for _, p := range h.procs {
		if !p.exited() {
			p.stopping = true
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	for _, p := range h.procs {
		if !p.wait(killBound) {
			h.t.Errorf("%s survived SIGKILL for %v", p, killBound)
		}
	}
	if h.t.Failed() {
		for _, m := range h.members {
			h.t.Logf("last lines of %s's log (%s):\n%s", m.name, m.logPath, tail(m.logPath, 60))
		}
	}
	if keep := os.Getenv("WASMSTREAM_CHAOS_LOGS"); keep != "" {
		dst := filepath.Join(keep, strings.ReplaceAll(h.t.Name(), "/", "_")+"-"+time.Now().Format("150405"))
		if err := os.MkdirAll(dst, 0o755); err == nil {
			for _, m := range h.members {
				if data, err := os.ReadFile(m.logPath); err == nil {
					_ = os.WriteFile(filepath.Join(dst, m.name+".log"), data, 0o644)
				}
			}
			h.t.Logf("logs kept in %s", dst)
		}
	}
}

// logCounts counts, over every slot log, the lines containing each needle.
func (h *harness) logCounts(needles ...string) map[string]int {
	out := map[string]int{}
	for _, m := range h.members {
		f, err := os.Open(m.logPath)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			for _, n := range needles {
				if strings.Contains(sc.Text(), n) {
					out[n]++
				}
			}
		}
		f.Close()
	}
	return out
}
