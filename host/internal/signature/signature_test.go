package signature

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// module is a minimal valid module: one function that does nothing.
var module = []byte("\x00asm\x01\x00\x00\x00" +
	"\x01\x04\x01\x60\x00\x00" + // type: () -> ()
	"\x03\x02\x01\x00" + // function 0 of type 0
	"\x0a\x04\x01\x02\x00\x0b") // code: no locals, end

// codeByte is the offset of module's function body's only instruction.
const codeByte = 8 + 6 + 4 + 5

func keyPair(t *testing.T) (ed25519.PrivateKey, string) {
	t.Helper()
	priv, pub, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParsePrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "key.pub.pem")
	if err := os.WriteFile(f, pub, 0o600); err != nil {
		t.Fatal(err)
	}
	return k, f
}

func trust(t *testing.T, files ...string) *Trust {
	t.Helper()
	tr, err := LoadTrust("runtime.trusted_keys", files)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func sign(t *testing.T, wasm []byte, k ed25519.PrivateKey) []byte {
	t.Helper()
	out, err := Sign(wasm, k)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// customSection encodes a custom section named name with payload.
func customSection(name string, payload []byte) []byte {
	body := appendLEB(nil, uint32(len(name)))
	body = append(body, name...)
	body = append(body, payload...)
	out := appendLEB([]byte{0}, uint32(len(body)))
	return append(out, body...)
}

func TestSignVerify(t *testing.T) {
	k, pub := keyPair(t)
	signed := sign(t, module, k)
	if !bytes.HasPrefix(signed, module) {
		t.Fatal("a signed module does not start with the module's bytes")
	}
	if err := trust(t, pub).Verify(signed); err != nil {
		t.Fatalf("the happy path: %v", err)
	}
	// Signing again replaces the signature: the same bytes (Ed25519 is
	// deterministic), one section.
	again := sign(t, signed, k)
	if !bytes.Equal(again, signed) {
		t.Fatal("signing a signed module again did not replace its signature")
	}
	// Several keys trusted, in one file and in several.
	k2, pub2 := keyPair(t)
	both, _ := os.ReadFile(pub)
	more, _ := os.ReadFile(pub2)
	f := filepath.Join(t.TempDir(), "both.pem")
	if err := os.WriteFile(f, append(both, more...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := trust(t, f).Verify(sign(t, module, k2)); err != nil {
		t.Fatalf("the second key of a file: %v", err)
	}
	if err := trust(t, pub, pub2).Verify(sign(t, module, k2)); err != nil {
		t.Fatalf("the second file: %v", err)
	}
}

func TestVerifyRefuses(t *testing.T) {
	k, pub := keyPair(t)
	other, _ := keyPair(t)
	signed := sign(t, module, k)
	sig := signed[len(module):]
	flip := func(b []byte, i int) []byte {
		b = bytes.Clone(b)
		b[i] ^= 0x01
		return b
	}
	cases := []struct {
		name string
		wasm []byte
		want error
		says string
	}{
		{"unsigned", module, ErrUnsigned, "sign it with a trusted key"},
		{"a code byte flipped", flip(signed, codeByte), ErrMismatch, "changed after it was signed"},
		{"the header's version flipped", flip(signed, 4), ErrMismatch, "changed after it was signed"},
		{"the signature flipped", flip(signed, len(signed)-1), ErrMismatch, "does not match"},
		{"an unknown key", sign(t, module, other), ErrUnknownKey, "not in runtime.trusted_keys"},
		{"a custom section appended", append(bytes.Clone(signed), customSection("name", []byte{0})...), ErrMalformed, "not the module's last section"},
		{"the signature twice", append(bytes.Clone(signed), sig...), ErrMalformed, "2 wasmstream.signature sections"},
		{"the signature in the middle", append(append(bytes.Clone(module[:8+6]), sig...), module[8+6:]...), ErrMalformed, "not the module's last section"},
		{"a custom section inserted before the signature", append(append(bytes.Clone(module), customSection("x", []byte("evil"))...), sig...), ErrMismatch, "changed after it was signed"},
		{"a short payload", append(bytes.Clone(module), customSection(SectionName, []byte{1, 2, 3})...), ErrMalformed, "payload is 3 bytes"},
		{"an unknown format", append(bytes.Clone(module), customSection(SectionName, append([]byte{2}, make([]byte, payloadSize-1)...))...), ErrMalformed, "format byte"},
		{"a truncated module", signed[:len(signed)-1], ErrMalformed, "past the end"},
		{"not a module", []byte("hello world"), ErrMalformed, "not a WebAssembly module"},
		{"a section size over 32 bits", append(bytes.Clone(module), 0, 0xff, 0xff, 0xff, 0xff, 0x7f), ErrMalformed, "over 32 bits"},
	}
	tr := trust(t, pub)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := tr.Verify(c.wasm)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("error %q does not say %q", err, c.says)
			}
		})
	}
}

func TestUnknownKeyNamesBoth(t *testing.T) {
	k, _ := keyPair(t)
	_, pub := keyPair(t)
	err := trust(t, pub).Verify(sign(t, module, k))
	signer := KeyFingerprint(k.Public().(ed25519.PublicKey))
	if !strings.Contains(err.Error(), signer) || !strings.Contains(err.Error(), pub) {
		t.Fatalf("error %q names neither the signer %s nor the trusted key file %s", err, signer, pub)
	}
}

func TestSignRefusesAMisplacedSignature(t *testing.T) {
	k, _ := keyPair(t)
	signed := sign(t, module, k)
	_, err := Sign(append(signed, customSection("name", []byte{0})...), k)
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("signing a module with a signature in the middle: got %v, want ErrMalformed", err)
	}
}

func TestKeyFiles(t *testing.T) {
	priv, pub, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, c := range []struct {
		name string
		data []byte
		says string
	}{
		{"private.pem", priv, "a private key: trust its public key"},
		{"empty.pem", []byte("not pem"), "no PEM"},
		{"cert.pem", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), `type "CERTIFICATE"`},
	} {
		_, err := LoadTrust("runtime.trusted_keys", []string{write(c.name, c.data)})
		if err == nil || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "runtime.trusted_keys[0]") {
			t.Errorf("%s: got %v, want an error naming runtime.trusted_keys[0] that says %q", c.name, err, c.says)
		}
	}
	if _, err := LoadTrust("runtime.trusted_keys", []string{filepath.Join(dir, "missing.pem")}); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("a missing key file: %v", err)
	}
	if _, err := ParsePrivateKey(pub); err == nil || !strings.Contains(err.Error(), "a public key") {
		t.Errorf("signing with a public key: %v", err)
	}
	if tr, err := LoadTrust("runtime.trusted_keys", nil); tr != nil || err != nil {
		t.Errorf("no keys: %v, %v; want nil, nil (no check)", tr, err)
	}
}
