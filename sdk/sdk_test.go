package sdk_test

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/sdktest"
)

// The handles most tests use. They are made by TestMain, after package
// initialization, so that they are resolved on first use: these tests
// exercise that path, and hosts that declare only some of them. (Package
// variables would be resolved at every start; declare_test.go covers that.)
var (
	outA   *sdk.OutputHandle
	outB   *sdk.OutputHandle
	counts *sdk.StoreHandle
)

func TestMain(m *testing.M) {
	outA, outB, counts = sdk.Output("a"), sdk.Output("b"), sdk.Store("counts")
	os.Exit(m.Run())
}

// plugin registers handler and init (nil for none) as a plugin's init
// functions would, and starts a fake host with opts.
func plugin(t *testing.T, handler func(*sdk.Record) error, init func() error, opts ...sdktest.Option) *sdktest.Host {
	t.Helper()
	sdk.Handle(handler)
	sdk.OnInit(init)
	return sdktest.New(t, opts...)
}

func TestHandlerErrorFailsRecordWithItsText(t *testing.T) {
	h := plugin(t, func(r *sdk.Record) error {
		if err := outA.Emit(sdk.Out{Value: r.Value}); err != nil {
			return err
		}
		if string(r.Value) == "bad" {
			return errors.New("value is bad")
		}
		return nil
	}, nil, sdktest.Outputs("a"))

	res := h.Process(sdktest.Record{Value: []byte("bad")})
	if res.Status != abi.StatusFailed || res.Err == nil || res.Err.Error() != "value is bad" {
		t.Fatalf("got status %d err %v, want FAILED with the handler's text", res.Status, res.Err)
	}
	if len(res.All) != 0 {
		t.Fatalf("a failed record's emits must be discarded, got %d", len(res.All))
	}
	res = h.MustProcess(sdktest.Record{Value: []byte("good")})
	if len(res.Emitted["a"]) != 1 {
		t.Fatalf("emitted %v", res.Emitted)
	}
}

func TestHandlerErrorWithoutTextStillSaysSomething(t *testing.T) {
	h := plugin(t, func(*sdk.Record) error { return errors.New("") }, nil)
	res := h.Process(sdktest.Record{})
	if res.Err == nil || res.Err.Error() == "" {
		t.Fatalf("err = %v, want a non-empty reason", res.Err)
	}
}

type stringer struct{}

func (stringer) String() string { return "a stringer" }

func TestPanicIsRecoveredAndInstanceSurvives(t *testing.T) {
	for _, tc := range []struct {
		value any
		want  string
	}{
		{"boom", "panic: boom"},
		{errors.New("an error"), "panic: an error"},
		{stringer{}, "panic: a stringer"},
		{42, "panic: 42"},
		{struct{ x int }{1}, "panic: (a value of a type the SDK does not print; panic with a string or an error)"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			h := plugin(t, func(r *sdk.Record) error {
				if r.Value == nil {
					panic(tc.value)
				}
				return outA.Emit(sdk.Out{Value: r.Value})
			}, nil, sdktest.Outputs("a"))
			res := h.Process(sdktest.Record{})
			if res.Status != abi.StatusFailed || res.Err == nil || res.Err.Error() != tc.want {
				t.Fatalf("got status %d err %v, want %q", res.Status, res.Err, tc.want)
			}
			logs := h.Logs()
			if len(logs) != 1 || logs[0].Level != sdk.LevelError ||
				!strings.HasPrefix(logs[0].Msg, tc.want+"\n") || !strings.Contains(logs[0].Msg, "sdk_test.go") {
				t.Fatalf("want one error log with the panic and its stack, got %+v", logs)
			}
			// The same instance goes on.
			if res := h.MustProcess(sdktest.Record{Value: []byte("v")}); len(res.All) != 1 {
				t.Fatalf("after the panic: emitted %d records", len(res.All))
			}
		})
	}
	// A nil-pointer dereference is a runtime error, recovered the same way.
	h := plugin(t, func(*sdk.Record) error {
		var p *sdk.Record
		_ = p.Key
		return nil
	}, nil)
	if res := h.Process(sdktest.Record{}); res.Err == nil || !strings.HasPrefix(res.Err.Error(), "panic: runtime error: ") {
		t.Fatalf("err = %v", res.Err)
	}
}

func TestRecordFields(t *testing.T) {
	var got sdk.Record
	var gotHeader []byte
	var gotHeaderOK bool
	h := plugin(t, func(r *sdk.Record) error {
		got = *r
		got.Key, got.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
		got.Headers = nil
		gotHeader, gotHeaderOK = r.Header("h")
		gotHeader = bytes.Clone(gotHeader)
		return nil
	}, nil)
	h.MustProcess(sdktest.Record{Key: []byte{}, Value: nil, Timestamp: 1700000000123, Partition: 7, Offset: 99, Input: 2,
		Headers: []abi.Header{{Key: "h", Value: []byte("first")}, {Key: "h", Value: []byte("last")}}})
	if got.Key == nil || len(got.Key) != 0 {
		t.Errorf("Key = %#v, want empty non-nil", got.Key)
	}
	if got.Value != nil {
		t.Errorf("Value = %#v, want nil (null)", got.Value)
	}
	if got.Timestamp != 1700000000123 || got.Partition != 7 || got.Offset != 99 || got.Input != 2 {
		t.Errorf("fields = %+v", got)
	}
	if !gotHeaderOK || string(gotHeader) != "last" {
		t.Errorf("Header(h) = %q, %v; want the last one", gotHeader, gotHeaderOK)
	}
}

// Appending to r.Headers must not write into the SDK's decode buffer.
func TestAppendToHeadersCopies(t *testing.T) {
	h := plugin(t, func(r *sdk.Record) error {
		a := append(r.Headers, sdk.Header{Key: "x", Value: []byte("1")})
		b := append(r.Headers, sdk.Header{Key: "y", Value: []byte("2")})
		if a[len(a)-1].Key != "x" || b[len(b)-1].Key != "y" {
			return errors.New("appends share a backing array")
		}
		return outA.Emit(sdk.Out{Headers: a})
	}, nil, sdktest.Outputs("a"))
	res := h.MustProcess(sdktest.Record{Headers: []abi.Header{{Key: "h", Value: nil}, {Key: "e", Value: []byte{}}}})
	hs := res.Emitted["a"][0].Headers
	if len(hs) != 3 || hs[0].Value != nil || hs[1].Value == nil || len(hs[1].Value) != 0 || hs[2].Key != "x" {
		t.Fatalf("emitted headers %#v: null and empty must survive", hs)
	}
}

func TestEmitDefaultsAndChoices(t *testing.T) {
	h := plugin(t, func(r *sdk.Record) error {
		if err := outA.Emit(sdk.Out{Key: r.Key, Value: r.Value}); err != nil {
			return err
		}
		if err := outB.Emit(sdk.Out{Key: nil, Value: nil, Timestamp: 5}); err != nil {
			return err
		}
		return outA.EmitTo(3, sdk.Out{Key: []byte{}, Value: []byte{}})
	}, nil, sdktest.Outputs("b", "a"))
	res := h.MustProcess(sdktest.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: 1234})
	if len(res.All) != 3 || res.All[0].Output != "a" || res.All[1].Output != "b" || res.All[2].Output != "a" {
		t.Fatalf("emit order/outputs: %+v", res.All)
	}
	e := res.All[0]
	if string(e.Key) != "k" || string(e.Value) != "v" || e.Timestamp != 1234 || e.Partition != abi.AnyPartition {
		t.Errorf("default emit = %+v; want the input's timestamp and AnyPartition", e)
	}
	if e := res.All[1]; e.Key != nil || e.Value != nil || e.Timestamp != 5 {
		t.Errorf("null key/value, explicit timestamp: %+v", e)
	}
	if e := res.All[2]; e.Partition != 3 || e.Key == nil || e.Value == nil {
		t.Errorf("EmitTo(3) with empty key/value: %+v", e)
	}
	// Outputs are indexed in sorted order: "a" is 0, "b" is 1.
	var rec abi.Record
	if err := rec.Decode(res.All[1].Raw); err != nil || rec.Index != 1 || rec.Offset != abi.NoOffset {
		t.Errorf("raw emit of b: index %d offset %d err %v", rec.Index, rec.Offset, err)
	}
}

func TestEmitToUndeclaredOutput(t *testing.T) {
	var emitErr error
	h := plugin(t, func(r *sdk.Record) error {
		emitErr = outB.Emit(sdk.Out{Value: r.Value})
		return emitErr
	}, nil, sdktest.Outputs("a"))
	res := h.Process(sdktest.Record{Value: []byte("v")})
	if !errors.Is(emitErr, abi.ErrnoNoName) {
		t.Fatalf("Emit = %v, want ENONAME", emitErr)
	}
	var he *sdk.HostError
	if !errors.As(emitErr, &he) || he.Name != "b" || he.Call != abi.ImportOutputIndex {
		t.Fatalf("error %#v should name the call and the output", emitErr)
	}
	if res.Err == nil || !strings.Contains(res.Err.Error(), `"b"`) {
		t.Fatalf("record error %v should name the output", res.Err)
	}
}

func TestCheckInInitFailsStart(t *testing.T) {
	sdk.Handle(func(*sdk.Record) error { return nil })
	sdk.OnInit(func() error { return outB.Check() })
	_, err := sdktest.Start(t, sdktest.Outputs("a"))
	if err == nil || !strings.Contains(err.Error(), `output_index "b": ENONAME`) {
		t.Fatalf("Start = %v, want init to fail naming output b", err)
	}
	// A host that declares it starts.
	sdk.OnInit(func() error {
		if err := outB.Check(); err != nil {
			return err
		}
		return counts.Check()
	})
	sdktest.New(t, sdktest.Outputs("b"), sdktest.Stores("counts"))
}

func TestInitHook(t *testing.T) {
	ran := 0
	h := plugin(t, func(*sdk.Record) error { return nil }, func() error {
		ran++
		sdk.LogInfo("starting")
		return nil
	})
	if ran != 1 {
		t.Fatalf("init ran %d times", ran)
	}
	if logs := h.Logs(); len(logs) != 1 || logs[0].Msg != "starting" || logs[0].Level != sdk.LevelInfo {
		t.Fatalf("logs %+v", logs)
	}
	h.MustProcess(sdktest.Record{})
	if ran != 1 {
		t.Fatalf("init ran again on a record")
	}

	// Errors and panics fail the start with their text.
	sdk.OnInit(func() error { return errors.New(`config: "field" is required`) })
	if _, err := sdktest.Start(t); err == nil || err.Error() != `config: "field" is required` {
		t.Fatalf("Start = %v", err)
	}
	sdk.OnInit(func() error { panic("init boom") })
	if _, err := sdktest.Start(t); err == nil || err.Error() != "panic: init boom" {
		t.Fatalf("Start = %v", err)
	}
}

// Emit and state belong to records; during init the host refuses them.
func TestNoEmitOrStateDuringInit(t *testing.T) {
	var emitErr, putErr, getErr, scanErr error
	plugin(t, func(*sdk.Record) error { return nil }, func() error {
		emitErr = outA.Emit(sdk.Out{})
		putErr = counts.Put([]byte("k"), []byte("v"))
		_, _, getErr = counts.Get([]byte("k"))
		_, scanErr = counts.Scan(nil, nil)
		return nil
	}, sdktest.Outputs("a"), sdktest.Stores("counts"))
	for name, err := range map[string]error{"emit": emitErr, "put": putErr, "get": getErr, "scan": scanErr} {
		if !errors.Is(err, abi.ErrnoPhase) {
			t.Errorf("%s during init = %v, want EPHASE", name, err)
		}
	}
}

func TestEmitTooLarge(t *testing.T) {
	var err error
	h := plugin(t, func(*sdk.Record) error {
		err = outA.Emit(sdk.Out{Value: make([]byte, abi.MaxRecordSize)})
		return nil
	}, nil, sdktest.Outputs("a"))
	if res := h.MustProcess(sdktest.Record{}); len(res.All) != 0 {
		t.Fatal("an oversized record was emitted")
	}
	if !errors.Is(err, abi.ErrnoTooLarge) {
		t.Fatalf("Emit = %v, want ETOOLARGE", err)
	}
}

func TestConfig(t *testing.T) {
	var got []byte
	big := `{"pad":"` + strings.Repeat("x", 5000) + `"}` // over the SDK's first read buffer
	for _, cfg := range []string{`{"field":"x"}`, big, ""} {
		plugin(t, func(*sdk.Record) error { return nil }, func() error {
			got = sdk.Config()
			if again := sdk.Config(); len(got) > 0 && &again[0] != &got[0] {
				return errors.New("Config is not cached")
			}
			return nil
		}, sdktest.Config(cfg))
		if string(got) != cfg || got == nil {
			t.Fatalf("Config() = %.40q (nil=%v), want %.40q", got, got == nil, cfg)
		}
	}
}

func TestLogLevels(t *testing.T) {
	h := plugin(t, func(*sdk.Record) error {
		sdk.LogDebug("d")
		sdk.LogInfo("i")
		sdk.LogWarn("w")
		sdk.LogError("e")
		sdk.Log(sdk.LevelInfo, strings.Repeat("x", abi.MaxLogSize+10))
		return nil
	}, nil)
	h.MustProcess(sdktest.Record{})
	logs := h.Logs()
	want := []sdk.Level{sdk.LevelDebug, sdk.LevelInfo, sdk.LevelWarn, sdk.LevelError, sdk.LevelInfo}
	if len(logs) != len(want) {
		t.Fatalf("logs %+v", logs)
	}
	for i, l := range logs {
		if l.Level != want[i] {
			t.Errorf("log %d level %d, want %d", i, l.Level, want[i])
		}
	}
	if len(logs[4].Msg) != abi.MaxLogSize {
		t.Errorf("long log kept %d bytes, want the host's cut at %d", len(logs[4].Msg), abi.MaxLogSize)
	}
}

func TestStateGetPutDelete(t *testing.T) {
	type step struct {
		missing, empty, readOwn, large bool
		delGone                        bool
	}
	var s step
	bigVal := bytes.Repeat([]byte("v"), 3000) // over the SDK's first read buffer
	h := plugin(t, func(r *sdk.Record) error {
		s = step{}
		_, ok, err := counts.Get([]byte("nope"))
		s.missing = !ok && err == nil
		if err := counts.Put([]byte("empty"), nil); err != nil {
			return err
		}
		v, ok, err := counts.Get([]byte("empty"))
		s.empty = ok && v != nil && len(v) == 0 && err == nil
		if err := counts.Put([]byte("k"), r.Value); err != nil {
			return err
		}
		v, _, _ = counts.Get([]byte("k"))
		s.readOwn = bytes.Equal(v, r.Value)
		if err := counts.Put([]byte("big"), bigVal); err != nil {
			return err
		}
		v, _, _ = counts.Get([]byte("big"))
		s.large = bytes.Equal(v, bigVal)
		if err := counts.Delete([]byte("empty")); err != nil {
			return err
		}
		if err := counts.Delete([]byte("never-there")); err != nil {
			return err
		}
		_, ok, _ = counts.Get([]byte("empty"))
		s.delGone = !ok
		if string(r.Key) == "fail" {
			return errors.New("rejected")
		}
		return nil
	}, nil, sdktest.Stores("counts"))

	h.MustProcess(sdktest.Record{Value: []byte("1")})
	if !s.missing || !s.empty || !s.readOwn || !s.large || !s.delGone {
		t.Fatalf("in-record semantics: %+v", s)
	}
	st := h.State("counts")
	if v, ok := st.Get("k"); !ok || string(v) != "1" {
		t.Fatalf("committed k = %q %v", v, ok)
	}
	if _, ok := st.Get("empty"); ok {
		t.Fatal("deleted key committed")
	}
	// A failed record's writes are discarded.
	h.Process(sdktest.Record{Key: []byte("fail"), Value: []byte("2")})
	if v, _ := st.Get("k"); string(v) != "1" {
		t.Fatalf("failed record's put committed: k = %q", v)
	}
}

func TestStateLimits(t *testing.T) {
	var keyErr, valErr, okErr error
	h := plugin(t, func(*sdk.Record) error {
		keyErr = counts.Put(make([]byte, abi.MaxKeySize+1), nil)
		valErr = counts.Put([]byte("k"), make([]byte, abi.MaxValueSize+1))
		okErr = counts.Put(make([]byte, abi.MaxKeySize), make([]byte, abi.MaxValueSize))
		return nil
	}, nil, sdktest.Stores("counts"))
	h.MustProcess(sdktest.Record{})
	if !errors.Is(keyErr, abi.ErrnoTooLarge) || !errors.Is(valErr, abi.ErrnoTooLarge) {
		t.Fatalf("over-limit puts: key %v, value %v; want ETOOLARGE", keyErr, valErr)
	}
	if okErr != nil {
		t.Fatalf("put at the limits: %v", okErr)
	}
	if !strings.Contains(keyErr.Error(), `state_put "counts"`) {
		t.Fatalf("error %q should name the call and the store", keyErr)
	}
}

func TestUndeclaredStore(t *testing.T) {
	var err error
	other := sdk.Store("other")
	h := plugin(t, func(*sdk.Record) error {
		_, _, err = other.Get([]byte("k"))
		return nil
	}, nil, sdktest.Stores("counts"))
	h.MustProcess(sdktest.Record{})
	if !errors.Is(err, abi.ErrnoNoName) {
		t.Fatalf("Get on undeclared store = %v", err)
	}
}

func scanAll(it *sdk.Iterator, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []string
	for it.Next() {
		v := string(it.Value())
		if len(v) > 20 {
			v = strconv.Itoa(len(v)) + " bytes"
		}
		out = append(out, string(it.Key())+"="+v)
	}
	return out, it.Err()
}

func TestScan(t *testing.T) {
	got := map[string][]string{}
	h := plugin(t, func(*sdk.Record) error {
		// Staged writes are visible to the scan: one new key, one deleted.
		if err := counts.Put([]byte("b2"), []byte("new")); err != nil {
			return err
		}
		if err := counts.Delete([]byte("b1")); err != nil {
			return err
		}
		var err error
		for name, r := range map[string][2][]byte{
			"all":     {nil, nil},
			"b..c":    {[]byte("b"), []byte("c")},
			"from b2": {[]byte("b2"), nil},
			"empty":   {[]byte("x"), []byte("y")},
		} {
			if got[name], err = scanAll(counts.Scan(r[0], r[1])); err != nil {
				return err
			}
		}
		if got["prefix b"], err = scanAll(counts.ScanPrefix([]byte("b"))); err != nil {
			return err
		}
		got["prefix ff"], err = scanAll(counts.ScanPrefix([]byte{0xff}))
		return err
	}, nil, sdktest.Stores("counts"))
	st := h.State("counts")
	for _, k := range []string{"a", "b", "b1", "b3", "c", "\xff\x01", "B"} {
		st.Put(k, []byte("v"+k))
	}
	st.Put("big", bytes.Repeat([]byte("z"), 2000)) // over an iterator's first buffer
	h.MustProcess(sdktest.Record{})
	const bigEntry = "big=2000 bytes"
	want := map[string][]string{
		"all":       {"B=vB", "a=va", "b=vb", "b2=new", "b3=vb3", bigEntry, "c=vc", "\xff\x01=v\xff\x01"},
		"b..c":      {"b=vb", "b2=new", "b3=vb3", bigEntry},
		"from b2":   {"b2=new", "b3=vb3", bigEntry, "c=vc", "\xff\x01=v\xff\x01"},
		"empty":     nil,
		"prefix b":  {"b=vb", "b2=new", "b3=vb3", bigEntry},
		"prefix ff": {"\xff\x01=v\xff\x01"},
	}
	for name, w := range want {
		if strings.Join(got[name], ",") != strings.Join(w, ",") {
			t.Errorf("%s: got %q\nwant %q", name, got[name], w)
		}
	}
}

// At most abi.MaxOpenCursors scans may be open in one record; exhausted
// and closed ones do not count.
func TestScanCursorLimit(t *testing.T) {
	var limitErr, afterCloseErr, exhaustErr error
	h := plugin(t, func(*sdk.Record) error {
		var its []*sdk.Iterator
		for range abi.MaxOpenCursors {
			it, err := counts.Scan(nil, nil)
			if err != nil {
				return err
			}
			its = append(its, it)
		}
		_, limitErr = counts.Scan(nil, nil)
		its[0].Close()
		its[0].Close() // idempotent
		_, afterCloseErr = counts.Scan(nil, nil)
		for its[1].Next() {
		}
		_, exhaustErr = counts.Scan(nil, nil)
		return nil
	}, nil, sdktest.Stores("counts"))
	h.State("counts").Put("k", []byte("v"))
	// Cursors left open are closed by the host at the end of the record,
	// so the next record starts with none.
	for i := range 2 {
		h.MustProcess(sdktest.Record{})
		if !errors.Is(limitErr, abi.ErrnoLimit) {
			t.Fatalf("record %d: scan %d = %v, want ELIMIT", i, abi.MaxOpenCursors+1, limitErr)
		}
		if afterCloseErr != nil || exhaustErr != nil {
			t.Fatalf("record %d: after close %v, after exhausting %v", i, afterCloseErr, exhaustErr)
		}
	}
}

// EIO fails the record even if the plugin ignores the error, as the host
// does (ABI.md section 6).
func TestHostIOFaultFailsRecord(t *testing.T) {
	h := plugin(t, func(*sdk.Record) error {
		_, _, _ = counts.Get([]byte("k")) // error ignored
		return outA.Emit(sdk.Out{Value: []byte("v")})
	}, nil, sdktest.Outputs("a"), sdktest.Stores("counts"),
		sdktest.Fault(func(call string) abi.Errno {
			if call == abi.ImportStateGet {
				return abi.ErrnoIO
			}
			return 0
		}))
	res := h.Process(sdktest.Record{})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "EIO") || len(res.All) != 0 {
		t.Fatalf("got err %v, %d emits; want the record failed by the host", res.Err, len(res.All))
	}
}

// A Host of a subtest replaces its parent's instead of waiting for it.
func TestNestedHostsReplace(t *testing.T) {
	sdk.OnInit(nil)
	sdk.Handle(func(*sdk.Record) error { return nil })
	parent := sdktest.New(t)
	parent.MustProcess(sdktest.Record{})
	t.Run("child", func(t *testing.T) {
		child := sdktest.New(t)
		child.MustProcess(sdktest.Record{})
	})
	again := sdktest.New(t) // replaces parent in the same test
	again.MustProcess(sdktest.Record{})
}

// Parallel tests are serialized by sdktest, each seeing its own host. The
// handler is registered once, as a plugin's init function would.
func TestParallelHosts(t *testing.T) {
	sdk.OnInit(nil)
	sdk.Handle(func(*sdk.Record) error {
		return outA.Emit(sdk.Out{Value: sdk.Config()})
	})
	for i := range 4 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			want := "cfg" + strconv.Itoa(i)
			h := sdktest.New(t, sdktest.Outputs("a"), sdktest.Config(want))
			for range 3 {
				if got := string(h.MustProcess(sdktest.Record{}).All[0].Value); got != want {
					t.Fatalf("config %q, want %q", got, want)
				}
			}
		})
	}
}

// Iterator errors end the iteration and surface through Err and Close; a
// cursor kept past its record is gone (ENOCURSOR).
func TestScanErrors(t *testing.T) {
	var kept *sdk.Iterator
	var nextErr, staleErr error
	failNext := false
	h := plugin(t, func(r *sdk.Record) error {
		if kept != nil {
			if kept.Next() {
				return errors.New("a stale iterator moved")
			}
			staleErr = kept.Err()
			kept = nil
			return nil
		}
		it, err := counts.Scan(nil, nil)
		if err != nil {
			return err
		}
		failNext = true
		if it.Next() {
			return errors.New("Next succeeded through a fault")
		}
		failNext = false
		nextErr = it.Close()
		if it.Next() || it.Key() != nil {
			return errors.New("a closed iterator moved")
		}
		kept, err = counts.Scan(nil, nil)
		return err
	}, nil, sdktest.Stores("counts"), sdktest.Fault(func(call string) abi.Errno {
		if failNext && call == abi.ImportScanNext {
			return abi.ErrnoInval
		}
		return 0
	}))
	h.State("counts").Put("k", []byte("v"))
	h.MustProcess(sdktest.Record{})
	if !errors.Is(nextErr, abi.ErrnoInval) || !strings.Contains(nextErr.Error(), `scan_next "counts"`) {
		t.Fatalf("Close after a failed Next = %v", nextErr)
	}
	h.MustProcess(sdktest.Record{})
	if !errors.Is(staleErr, abi.ErrnoNoCursor) {
		t.Fatalf("iterator from the previous record: %v, want ENOCURSOR", staleErr)
	}
}

func TestFakeStoreSeeding(t *testing.T) {
	h := plugin(t, func(*sdk.Record) error { return counts.Delete([]byte("b")) }, nil, sdktest.Stores("counts"))
	st := h.State("counts")
	st.Put("b", nil)
	st.Put("a", []byte("1"))
	st.Put("c", []byte("3"))
	st.Delete("c")
	if v, ok := st.Get("b"); !ok || v == nil || len(v) != 0 {
		t.Fatalf("seeded empty value: %#v %v", v, ok)
	}
	if strings.Join(st.Keys(), ",") != "a,b" || st.Len() != 2 || st.Name() != "counts" {
		t.Fatalf("keys %v len %d", st.Keys(), st.Len())
	}
	h.MustProcess(sdktest.Record{})
	if strings.Join(st.Keys(), ",") != "a" {
		t.Fatalf("after the record deleted b: %v", st.Keys())
	}
	if outA.Name() != "a" || counts.Name() != "counts" {
		t.Fatal("handle names")
	}
}

// Forward emits the input record as it came: the same bytes but for the
// fields an emit sets (offset -1, any partition, the output index).
func TestForward(t *testing.T) {
	h := plugin(t, func(r *sdk.Record) error { return outB.Forward(r) }, nil, sdktest.Outputs("a", "b"))
	for _, r := range []sdktest.Record{
		{Key: []byte("k"), Value: []byte("v"), Timestamp: 42, Offset: 7, Partition: 3},
		{Headers: []sdk.Header{{Key: "h", Value: []byte("1")}, {Key: "n"}}, Timestamp: 5, Input: 2},
		{Key: []byte{}, Value: []byte{}},
	} {
		res := h.MustProcess(r)
		want := abi.Record{Timestamp: r.Timestamp, Offset: abi.NoOffset, Partition: abi.AnyPartition, Index: 1,
			Key: r.Key, Value: r.Value, Headers: r.Headers}
		if got := res.Emitted["b"]; len(got) != 1 || !bytes.Equal(got[0].Raw, want.AppendEncode(nil)) {
			t.Fatalf("forwarded %+v: %+v", r, got)
		}
	}
}
