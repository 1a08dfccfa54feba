// Package signature signs plugin modules and verifies them against the
// keys a host trusts (runtime.trusted_keys), with Ed25519 from the
// standard library. The format is abi/ABI.md section 11:
//
//   - A signature is one custom section named "wasmstream.signature",
//     the module's LAST section. Its payload is 97 bytes: a format byte
//     (1), the signer's 32-byte Ed25519 public key, and the 64-byte
//     signature.
//   - The signed bytes are every byte of the file before that section:
//     the module with its signature section removed. Nothing else is
//     excluded, so the signature covers every byte that runs, and every
//     custom section too.
//   - The message signed is "wasmstream plugin signature v1\x00" followed
//     by the SHA-256 of the signed bytes (a small message, so a key kept
//     in a KMS or HSM can sign it).
//
// A module with a signature section anywhere but at its end, or with two,
// is refused, whatever its signature: bytes were added after it was
// signed.
//
// The package knows nothing of Wasm beyond the section framing and
// nothing of Kafka; it imports the standard library only.
package signature

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// SectionName is the name of the custom section that holds a signature.
const SectionName = "wasmstream.signature"

// formatV1 is the payload's first byte: the layout this package reads.
const formatV1 = 1

// payloadSize is a v1 payload's size: format, public key, signature.
const payloadSize = 1 + ed25519.PublicKeySize + ed25519.SignatureSize

// domain starts the signed message, so a signature made for something
// else with the same key never verifies as a plugin signature.
const domain = "wasmstream plugin signature v1\x00"

// The kinds of refusal; Verify's errors wrap one of them.
var (
	// ErrUnsigned: the module has no signature section.
	ErrUnsigned = errors.New("signature: not signed")
	// ErrUnknownKey: signed by a key the host does not trust.
	ErrUnknownKey = errors.New("signature: untrusted key")
	// ErrMismatch: the signature does not match the module's bytes.
	ErrMismatch = errors.New("signature: does not match the module")
	// ErrMalformed: not a module's section framing, or a signature
	// section that is not one well-formed signature at the module's end.
	ErrMalformed = errors.New("signature: malformed")
)

// Signature is a module's signature section, parsed.
type Signature struct {
	Key ed25519.PublicKey // the signer's public key
	Sig []byte            // the Ed25519 signature of Message(signed bytes)
}

// Fingerprint names the signer's key (KeyFingerprint).
func (s *Signature) Fingerprint() string { return KeyFingerprint(s.Key) }

// KeyFingerprint names a public key in messages: "ed25519:" and the first
// 16 hex digits of the SHA-256 of its 32 bytes. Only a name: trust
// compares whole keys.
func KeyFingerprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "ed25519:" + hex.EncodeToString(sum[:8])
}

// Message is what a signature signs for the signed bytes: the domain
// string, then their SHA-256.
func Message(signed []byte) []byte {
	sum := sha256.Sum256(signed)
	return append([]byte(domain), sum[:]...)
}

// Split parses wasm's section framing and returns the signed bytes and
// the signature: the signed bytes are all of wasm and sig is nil for an
// unsigned module. It refuses (ErrMalformed) a file that is not a Wasm
// module's framing, a signature section that is not the last section, two
// signature sections, and a payload that is not one v1 signature.
func Split(wasm []byte) (signed []byte, sig *Signature, err error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		return nil, nil, fmt.Errorf("%w: not a WebAssembly module (no \\0asm header)", ErrMalformed)
	}
	type found struct{ start, payload, end int }
	var sigs []found
	sections := 0
	for off := 8; off < len(wasm); {
		start := off
		id := wasm[off]
		off++
		size, n, err := leb32(wasm[off:])
		if err != nil {
			return nil, nil, fmt.Errorf("%w: section %d at byte %d: size: %v", ErrMalformed, sections, start, err)
		}
		off += n
		if uint64(size) > uint64(len(wasm)-off) {
			return nil, nil, fmt.Errorf("%w: section %d at byte %d: %d bytes, past the end of the module", ErrMalformed, sections, start, size)
		}
		end := off + int(size)
		if id == 0 {
			body := wasm[off:end]
			nameLen, n, err := leb32(body)
			if err != nil || uint64(nameLen) > uint64(len(body)-n) {
				return nil, nil, fmt.Errorf("%w: custom section %d at byte %d: a malformed name", ErrMalformed, sections, start)
			}
			if string(body[n:n+int(nameLen)]) == SectionName {
				sigs = append(sigs, found{start: start, payload: off + n + int(nameLen), end: end})
			}
		}
		off = end
		sections++
	}
	switch {
	case len(sigs) == 0:
		return wasm, nil, nil
	case len(sigs) > 1:
		return nil, nil, fmt.Errorf("%w: %d %s sections (at bytes %d and %d): a module has one signature, its last section; bytes were added after it was signed",
			ErrMalformed, len(sigs), SectionName, sigs[0].start, sigs[1].start)
	case sigs[0].end != len(wasm):
		return nil, nil, fmt.Errorf("%w: the %s section at byte %d is not the module's last section (%d bytes follow it): bytes were added after the module was signed",
			ErrMalformed, SectionName, sigs[0].start, len(wasm)-sigs[0].end)
	}
	p := wasm[sigs[0].payload:]
	if len(p) != payloadSize || p[0] != formatV1 {
		return nil, nil, fmt.Errorf("%w: the %s section's payload is %d bytes; a v1 signature is %d (format byte %d, key, signature)",
			ErrMalformed, SectionName, len(p), payloadSize, formatV1)
	}
	return wasm[:sigs[0].start], &Signature{
		Key: ed25519.PublicKey(slices.Clone(p[1 : 1+ed25519.PublicKeySize])),
		Sig: slices.Clone(p[1+ed25519.PublicKeySize:]),
	}, nil
}

// leb32 decodes an unsigned LEB128 of at most 32 bits, as the Wasm
// binary format encodes section and name sizes (at most 5 bytes).
func leb32(b []byte) (uint32, int, error) {
	var v uint32
	for i := 0; i < 5; i++ {
		if i >= len(b) {
			return 0, 0, errors.New("truncated")
		}
		c := b[i]
		if i == 4 && c > 0x0f {
			return 0, 0, errors.New("over 32 bits")
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v, i + 1, nil
		}
	}
	return 0, 0, errors.New("over 5 bytes")
}

// Sign returns wasm signed with key: wasm without its signature section
// (if it had one at its end) followed by a new one. A module with a
// misplaced or duplicated signature section is refused (ErrMalformed):
// re-sign the original.
func Sign(wasm []byte, key ed25519.PrivateKey) ([]byte, error) {
	signed, _, err := Split(wasm)
	if err != nil {
		return nil, err
	}
	sig := ed25519.Sign(key, Message(signed))
	pub := key.Public().(ed25519.PublicKey)
	payload := make([]byte, 0, payloadSize)
	payload = append(payload, formatV1)
	payload = append(payload, pub...)
	payload = append(payload, sig...)
	body := appendLEB(nil, uint32(len(SectionName)))
	body = append(body, SectionName...)
	body = append(body, payload...)
	out := make([]byte, 0, len(signed)+len(body)+6)
	out = append(out, signed...)
	out = append(out, 0) // custom section
	out = appendLEB(out, uint32(len(body)))
	return append(out, body...), nil
}

func appendLEB(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

// Trust is the set of public keys a host accepts signatures from.
type Trust struct {
	keys []trusted
}

type trusted struct {
	key    ed25519.PublicKey
	source string // where it came from: a file name
}

// LoadTrust reads the public keys of files (PEM "PUBLIC KEY" blocks:
// PKIX/SPKI Ed25519, as `wasmstream plugin keygen` and `openssl pkey
// -pubout` write them; a file may hold several). field names the
// setting in errors ("runtime.trusted_keys"). No files: nil, no check.
func LoadTrust(field string, files []string) (*Trust, error) {
	if len(files) == 0 {
		return nil, nil
	}
	t := &Trust{}
	for i, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		keys, err := ParsePublicKeys(data)
		if err != nil {
			return nil, fmt.Errorf("%s[%d] (%s): %w", field, i, f, err)
		}
		for _, k := range keys {
			t.keys = append(t.keys, trusted{key: k, source: f})
		}
	}
	return t, nil
}

// ParsePublicKeys parses every PEM block of data as an Ed25519 public key.
// A private key is refused with the command that writes its public key.
func ParsePublicKeys(data []byte) ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		switch b.Type {
		case "PUBLIC KEY":
		case "PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "OPENSSH PRIVATE KEY":
			return nil, errors.New("a private key: trust its public key instead (wasmstream plugin keygen writes it as KEY.pub.pem; or `openssl pkey -in KEY.pem -pubout -out KEY.pub.pem`), and keep the private key where plugins are signed")
		default:
			return nil, fmt.Errorf("a PEM block of type %q; want \"PUBLIC KEY\" (an Ed25519 public key)", b.Type)
		}
		k, err := x509.ParsePKIXPublicKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("public key: %w", err)
		}
		ek, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("a %T public key; plugin signatures are Ed25519 (`wasmstream plugin keygen`, or `openssl genpkey -algorithm ed25519`)", k)
		}
		keys = append(keys, ek)
	}
	if len(keys) == 0 {
		return nil, errors.New("no PEM \"PUBLIC KEY\" block")
	}
	return keys, nil
}

// ParsePrivateKey parses a PEM "PRIVATE KEY" block (PKCS#8 Ed25519, as
// `wasmstream plugin keygen` and `openssl genpkey -algorithm ed25519`
// write it).
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	b, _ := pem.Decode(data)
	switch {
	case b == nil:
		return nil, errors.New("no PEM block: want a \"PRIVATE KEY\" (PKCS#8 Ed25519)")
	case b.Type == "PUBLIC KEY":
		return nil, errors.New("a public key: signing needs the private key (the one wasmstream plugin keygen wrote without .pub)")
	case b.Type == "ENCRYPTED PRIVATE KEY":
		return nil, errors.New("an encrypted private key: decrypt it first (`openssl pkey -in KEY.pem -out PLAIN.pem`)")
	case b.Type != "PRIVATE KEY":
		return nil, fmt.Errorf("a PEM block of type %q; want \"PRIVATE KEY\" (PKCS#8 Ed25519)", b.Type)
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T private key; plugin signatures are Ed25519", k)
	}
	return ek, nil
}

// GenerateKey makes a key pair and returns it as PEM: the private key as
// PKCS#8 "PRIVATE KEY", the public one as PKIX "PUBLIC KEY".
func GenerateKey() (private, public []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	pk, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	pp, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pp}), nil
}

// Verify checks that wasm is signed by one of t's keys and that the
// signature matches its bytes. Its error wraps ErrUnsigned, ErrMalformed,
// ErrUnknownKey or ErrMismatch, names the key, and says how to fix it.
func (t *Trust) Verify(wasm []byte) error {
	signed, sig, err := Split(wasm)
	if err != nil {
		return fmt.Errorf("%w; runtime.trusted_keys is set, so only a module signed once, unchanged since, runs: sign the original again (wasmstream plugin sign --key KEY.pem FILE)", err)
	}
	if sig == nil {
		return fmt.Errorf("%w: the module has no %s section, and runtime.trusted_keys is set, so only signed modules run: sign it with a trusted key (wasmstream plugin sign --key KEY.pem FILE)",
			ErrUnsigned, SectionName)
	}
	known := false
	for _, k := range t.keys {
		if k.key.Equal(sig.Key) {
			known = true
			break
		}
	}
	if !known {
		return fmt.Errorf("%w: signed by %s, which is not in runtime.trusted_keys (%s): sign it with a trusted key, or add the signer's public key file to runtime.trusted_keys",
			ErrUnknownKey, sig.Fingerprint(), t.describe())
	}
	if !ed25519.Verify(sig.Key, Message(signed), sig.Sig) {
		return fmt.Errorf("%w: the signature by %s is not of these bytes: the module was changed after it was signed (or the section was copied from another module); rebuild it or get the original, and sign it again",
			ErrMismatch, sig.Fingerprint())
	}
	return nil
}

// describe lists the trusted keys: fingerprint and file.
func (t *Trust) describe() string {
	var s []string
	for _, k := range t.keys {
		s = append(s, KeyFingerprint(k.key)+" from "+k.source)
	}
	return "trusted: " + strings.Join(s, ", ")
}
