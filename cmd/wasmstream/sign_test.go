package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/internal/testbroker"
)

func copyFile(t *testing.T, from, to string) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return to
}

// keygen, sign, inspect, and a config whose runtime.trusted_keys (a path
// relative to the config file) makes validate and deploy refuse what is
// not signed by the key, on the test broker.
func TestPluginSignCommands(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "team.pem")
	code, out, errs := runCLI(t, "plugin", "keygen", "--out", key)
	if code != exitOK || !regexp.MustCompile(`public key .*team\.pub\.pem \(ed25519:[0-9a-f]{16}\)`).MatchString(out) {
		t.Fatalf("keygen: exit %d, %q, %q", code, out, errs)
	}
	fp := regexp.MustCompile(`ed25519:[0-9a-f]{16}`).FindString(out)
	if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the private key file: %v, %v; want mode 0600", st, err)
	}
	if code, _, errs := runCLI(t, "plugin", "keygen", "--out", key); code != exitError || !strings.Contains(errs, "never overwrites") {
		t.Fatalf("keygen over an existing key: exit %d, %q", code, errs)
	}
	strangerKey := filepath.Join(dir, "stranger.pem")
	if code, _, errs := runCLI(t, "plugin", "keygen", "--out", strangerKey); code != exitOK {
		t.Fatal(errs)
	}

	plugin := copyFile(t, testdata("passthrough"), filepath.Join(dir, "passthrough.wasm"))
	unsigned, _ := os.ReadFile(plugin)
	code, out, errs = runCLI(t, "plugin", "sign", "--key", key, plugin)
	if code != exitOK || !strings.Contains(out, "signed "+plugin+" with "+fp) {
		t.Fatalf("sign: exit %d, %q, %q", code, out, errs)
	}
	signed, _ := os.ReadFile(plugin)
	if !bytes.HasPrefix(signed, unsigned) || len(signed) <= len(unsigned) {
		t.Fatal("sign did not append a signature to the file in place")
	}
	code, out, _ = runCLI(t, "plugin", "inspect", plugin)
	if code != exitOK || !strings.Contains(out, "signature:    "+fp+", matches") {
		t.Fatalf("inspect of the signed module: exit %d:\n%s", code, out)
	}
	if _, out, _ := runCLI(t, "plugin", "inspect", testdata("passthrough")); !strings.Contains(out, "signature:    none") {
		t.Fatalf("inspect of an unsigned module:\n%s", out)
	}
	// A code byte changed after signing: trap's "i32.const 65536" made
	// 131072, a module that still compiles.
	trapSigned := filepath.Join(dir, "trap-signed.wasm")
	if code, _, errs := runCLI(t, "plugin", "sign", "--key", key, testdata("trap"), "--out", trapSigned); code != exitOK {
		t.Fatal(errs)
	}
	tampered, _ := os.ReadFile(trapSigned)
	i := bytes.Index(tampered, []byte{0x41, 0x80, 0x80, 0x04})
	if i < 0 {
		t.Fatal("trap.wasm no longer holds i32.const 65536")
	}
	tampered[i+3] = 0x05
	tamperedFile := filepath.Join(dir, "tampered.wasm")
	if err := os.WriteFile(tamperedFile, tampered, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, out, _ := runCLI(t, "plugin", "inspect", tamperedFile); !strings.Contains(out, "signature:    BAD, by "+fp+": the signature does not match") {
		t.Errorf("inspect of a tampered module:\n%s", out)
	}
	strangers := filepath.Join(dir, "strangers.wasm")
	if code, _, errs := runCLI(t, "plugin", "sign", "--key", strangerKey, testdata("trap"), "--out", strangers); code != exitOK {
		t.Fatal(errs)
	}
	for _, args := range [][]string{
		{"plugin", "sign", plugin},
		{"plugin", "sign", "--key", key},
		{"plugin", "keygen"},
	} {
		if code, _, errs := runCLI(t, args...); code != exitUsage || !strings.Contains(errs, "usage:") {
			t.Errorf("%v: exit %d, %q; want a usage error", args, code, errs)
		}
	}
	if code, _, errs := runCLI(t, "plugin", "sign", "--key", filepath.Join(dir, "team.pub.pem"), plugin); code != exitError || !strings.Contains(errs, "signing needs the private key") {
		t.Errorf("sign with a public key: exit %d, %q", code, errs)
	}

	b := testbroker.New(t)
	conf := writeFile(t, dir, "pipeline.yaml", "app_id: "+b.Name(t, "app")+"\nkafka:\n  brokers: ["+strings.Join(b.Addrs(), ",")+"]\n"+
		"runtime: {cache_dir: \"off\", trusted_keys: [team.pub.pem]}\n"+
		"processors:\n  - name: proc\n    plugin: PLUGIN\n    inputs: [in]\n    outputs: {out: out}\n")
	withPlugin := func(p string) string {
		body, _ := os.ReadFile(conf)
		return writeFile(t, t.TempDir(), "pipeline.yaml", strings.Replace(strings.ReplaceAll(string(body), "team.pub.pem", filepath.Join(dir, "team.pub.pem")), "PLUGIN", p, 1))
	}
	if code, out, errs := runCLI(t, "validate", "-c", withPlugin(plugin)); code != exitOK {
		t.Fatalf("validate of a signed plugin: exit %d, %q, %q", code, out, errs)
	}
	// The key path is relative to the config file's directory.
	body, _ := os.ReadFile(conf)
	rel := writeFile(t, dir, "signed.yaml", strings.Replace(string(body), "PLUGIN", plugin, 1))
	if code, _, errs := runCLI(t, "validate", "-c", rel); code != exitOK {
		t.Fatalf("validate with a relative trusted key path: %q", errs)
	}
	for _, c := range []struct{ file, says string }{
		{testdata("passthrough"), "not signed"},
		{tamperedFile, "does not match the module"},
		{strangers, "untrusted key"},
	} {
		abs, _ := filepath.Abs(c.file)
		code, _, errs := runCLI(t, "validate", "-c", withPlugin(abs))
		if code != exitError || !strings.Contains(errs, c.says) {
			t.Errorf("validate %s: exit %d, %q; want %q", c.file, code, errs, c.says)
		}
		code, _, errs = runCLI(t, "deploy", "-c", rel, "proc", c.file)
		if code != exitError || !strings.Contains(errs, c.says) || !strings.Contains(errs, "nothing published") {
			t.Errorf("deploy %s: exit %d, %q; want %q", c.file, code, errs, c.says)
		}
	}
	signedTrap := filepath.Join(dir, "trap.wasm")
	if code, _, errs := runCLI(t, "plugin", "sign", "--key", key, testdata("trap"), "--out", signedTrap); code != exitOK {
		t.Fatal(errs)
	}
	if code, out, errs := runCLI(t, "deploy", "-c", rel, "proc", signedTrap); code != exitOK || !strings.Contains(out, "deployed proc trap@") {
		t.Fatalf("deploy of a signed module: exit %d, %q, %q", code, out, errs)
	}
}
