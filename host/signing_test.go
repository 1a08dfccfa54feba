package host

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/host/internal/control"
	"github.com/wasmstream/wasmstream/host/internal/signature"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// signingKey makes a key pair in dir: the private key PEM and the public
// key's file.
func signingKey(t *testing.T, dir, name string) (priv []byte, pubFile string) {
	t.Helper()
	priv, pub, err := NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	pubFile = filepath.Join(dir, name+".pub.pem")
	if err := os.WriteFile(pubFile, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	return priv, pubFile
}

func signed(t *testing.T, wasm, key []byte) []byte {
	t.Helper()
	out, err := SignPlugin(wasm, key)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeModule(t *testing.T, dir, name string, wasm []byte) string {
	t.Helper()
	f := filepath.Join(dir, name)
	if err := os.WriteFile(f, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// badModules are the modules a host with trusted key trusted refuses,
// each with the refusal's kind: made from the trap plugin (a valid module)
// signed by trusted, and other, an untrusted key.
func badModules(t *testing.T, trusted, other []byte) []struct {
	name string
	wasm []byte
	want error
} {
	trap := depRead(t, engineTestdata("trap"))
	good := signed(t, trap, trusted)
	sig := good[len(trap):]
	// A code byte changed: "i32.const 65536" becomes 131072, a module that
	// still compiles and runs (deployed without trusted keys below).
	i := bytes.Index(good, []byte{0x41, 0x80, 0x80, 0x04})
	if i < 0 {
		t.Fatal("trap.wasm no longer holds i32.const 65536")
	}
	tampered := bytes.Clone(good)
	tampered[i+3] = 0x05
	passthrough := depRead(t, engineTestdata("passthrough"))
	return []struct {
		name string
		wasm []byte
		want error
	}{
		{"unsigned", trap, signature.ErrUnsigned},
		{"a code byte changed after signing", tampered, signature.ErrMismatch},
		{"another module's signature", append(bytes.Clone(passthrough), sig...), signature.ErrMismatch},
		{"an unknown key", signed(t, trap, other), signature.ErrUnknownKey},
		{"the signature section twice", append(bytes.Clone(good), sig...), signature.ErrMalformed},
		{"a section after the signature", append(bytes.Clone(good), 0, 3, 1, 'x', 0), signature.ErrMalformed},
	}
}

// With runtime.trusted_keys, validate, run (New) and deploy refuse every
// module not signed by a trusted key, each naming the problem and its
// fix, and accept a signed one.
func TestSignedPluginsRefusedUnlessTrusted(t *testing.T) {
	dir := t.TempDir()
	key, pub := signingKey(t, dir, "team")
	other, _ := signingKey(t, dir, "stranger")
	goodConfig := writeModule(t, dir, "passthrough.wasm", signed(t, depRead(t, engineTestdata("passthrough")), key))
	p := newPipeline(t, goodConfig, OnErrorFail)
	p.cfg.Runtime.TrustedKeys = []string{pub}
	ctx, log := depCtx(t), testLogger(t)

	if err := Validate(ctx, p.cfg, log); err != nil {
		t.Fatalf("validate of a signed plugin: %v", err)
	}
	fixes := map[error]string{
		signature.ErrUnsigned:   "wasmstream plugin sign --key KEY.pem",
		signature.ErrMismatch:   "changed after it was signed",
		signature.ErrUnknownKey: "add the signer's public key file to runtime.trusted_keys",
		signature.ErrMalformed:  "sign the original again",
	}
	for _, c := range badModules(t, key, other) {
		t.Run(c.name, func(t *testing.T) {
			cfg := p.cfg.Clone()
			cfg.Processors[0].Plugin = writeModule(t, t.TempDir(), "bad.wasm", c.wasm)
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, c.want) || !strings.Contains(err.Error(), fixes[c.want]) {
					t.Errorf("%s: %v\nwant %v, saying %q", what, err, c.want, fixes[c.want])
				}
			}
			err := Validate(ctx, cfg, log)
			check("validate", err)
			if err != nil && !strings.Contains(err.Error(), "processors[0] (proc)") {
				t.Errorf("validate's error does not name the processor: %v", err)
			}
			h, err := New(ctx, cfg, WithLogger(log))
			if err == nil {
				h.Close()
			}
			check("run", err)
			_, err = Deploy(ctx, p.cfg, "proc", c.wasm, "bad", log)
			check("deploy", err)
			if e := depEnd(t, p); e != -1 {
				t.Errorf("a refused deploy created the control topic (end %d)", e)
			}
		})
	}

	// The tampered module is a runnable one: without trusted keys it
	// deploys. Only the signature stands between it and the fleet.
	open := p.cfg.Clone()
	open.Runtime.TrustedKeys = nil
	if _, err := Deploy(ctx, open, "proc", badModules(t, key, other)[1].wasm, "tampered", log); err != nil {
		t.Fatalf("the tampered module does not deploy without trusted keys, so the test proves nothing: %v", err)
	}
	// A rollback to it, with the keys set, is refused before anything is
	// published: every process would refuse the version.
	trap := depRead(t, engineTestdata("trap"))
	if _, err := Deploy(ctx, p.cfg, "proc", signed(t, append(bytes.Clone(trap), 0, 3, 1, 'v', 3), key), "v3", log); err != nil {
		t.Fatal(err)
	}
	end := depEnd(t, p)
	_, err := Rollback(ctx, p.cfg, "proc", log)
	if !errors.Is(err, signature.ErrMismatch) || !strings.Contains(err.Error(), "tampered@") || !strings.Contains(err.Error(), "nothing published") {
		t.Fatalf("rollback to the tampered version: %v; want it refused naming it", err)
	}
	if e := depEnd(t, p); e != end {
		t.Fatalf("the refused rollback wrote %d records", e-end)
	}
	if _, err := Rollback(ctx, open, "proc", log); err != nil {
		t.Fatalf("without trusted keys the rollback publishes: %v", err)
	}
	// A trusted key file that is a private key, or missing, stops all.
	keyFile := writeModule(t, dir, "team.pem", key)
	for _, bad := range []string{keyFile, filepath.Join(dir, "nope.pub.pem")} {
		cfg := p.cfg.Clone()
		cfg.Runtime.TrustedKeys = []string{bad}
		if err := Validate(ctx, cfg, log); err == nil || !strings.Contains(err.Error(), "runtime.trusted_keys[0]") {
			t.Errorf("trusted key %s: validate said %v", bad, err)
		}
	}
}

// A running process with trusted keys refuses a version from the control
// topic that is not signed by one (published by a deploy without the
// keys: another operator, another tool), keeps its running version, and
// then takes a signed one.
func TestRunningProcessRefusesUnsignedDeploy(t *testing.T) {
	dir := t.TempDir()
	key, pub := signingKey(t, dir, "team")
	other, _ := signingKey(t, dir, "stranger")
	passthrough := signed(t, depRead(t, engineTestdata("passthrough")), key)
	p := newPipeline(t, writeModule(t, dir, "passthrough.wasm", passthrough), OnErrorFail)
	p.cfg.Runtime.TrustedKeys = []string{pub}
	h, _ := p.run(t)
	p.produce(t, "a", "b", "c")
	p.waitProcessed(t)
	config := "config@" + control.NewVersion(passthrough, "config").Short()
	waitVersion(t, h, config)

	open := p.cfg.Clone()
	open.Runtime.TrustedKeys = nil
	bad := badModules(t, key, other)
	for i, c := range bad {
		deployBytes(t, &pipeline{b: p.b, cfg: open}, c.wasm, fmt.Sprintf("bad%d", i))
		testutil.Eventually(t, 60*time.Second, func() error {
			v := h.Versions()[0]
			if v.Refusals < int64(i+1) {
				return fmt.Errorf("%d refusals, want %d", v.Refusals, i+1)
			}
			r := v.Refused[len(v.Refused)-1]
			if !strings.HasPrefix(r.ID, fmt.Sprintf("bad%d@", i)) || !strings.Contains(r.Reason, strings.TrimPrefix(c.want.Error(), "signature: ")) {
				return fmt.Errorf("latest refusal %+v; want bad%d refused: %v", r, i, c.want)
			}
			return nil
		})
		if v := h.Versions()[0]; v.Active.ID != config {
			t.Fatalf("after refusing %s the process runs %s, want %s", c.name, v.Active.ID, config)
		}
	}
	p.produce(t, "d")
	p.waitProcessed(t)

	// A process that starts now, while the control topic names the last
	// bad version, refuses it at startup and runs its config's plugin.
	h2, _ := p.run(t)
	if v := h2.Versions()[0]; v.Active.ID != config || len(v.Refused) != 1 ||
		!strings.HasPrefix(v.Refused[0].ID, fmt.Sprintf("bad%d@", len(bad)-1)) || !strings.Contains(v.Refused[0].Reason, "malformed") {
		t.Fatalf("a process started with a bad version in the control topic: %+v; want %s active and bad%d refused", v, config, len(bad)-1)
	}

	v2 := deployBytes(t, p, signed(t, depRead(t, engineTestdata("trap")), key), "v2")
	waitVersion(t, h, v2)
	waitVersion(t, h2, v2)
	p.produce(t, "e")
	p.waitProcessed(t)
}
