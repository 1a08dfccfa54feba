package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/wasmstream/wasmstream/host"
)

// keygen runs `wasmstream plugin keygen --out KEY.pem`: a new Ed25519 key
// pair, the private key in KEY.pem (mode 0600) and the public one, for
// runtime.trusted_keys, in KEY.pub.pem. It never overwrites a file.
func (e *env) keygen(args []string) int {
	fs := e.flagSet("plugin keygen")
	out := fs.String("out", "", "the private key file to write (required); the public key goes beside it as NAME.pub.pem")
	if err := fs.Parse(args); err != nil {
		return e.flagError("plugin keygen", err)
	}
	if *out == "" || fs.NArg() != 0 {
		fmt.Fprintln(e.stderr, "usage: wasmstream plugin keygen --out KEY.pem")
		return exitUsage
	}
	pubFile := strings.TrimSuffix(*out, ".pem") + ".pub.pem"
	priv, pub, err := host.NewSigningKey()
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream plugin keygen: %v\n", err)
		return exitError
	}
	if err := writeNew(*out, priv, 0o600); err != nil {
		fmt.Fprintf(e.stderr, "wasmstream plugin keygen: %v\n", err)
		return exitError
	}
	if err := writeNew(pubFile, pub, 0o644); err != nil {
		_ = os.Remove(*out) // no private key whose public half is missing
		fmt.Fprintf(e.stderr, "wasmstream plugin keygen: %v\n", err)
		return exitError
	}
	fp, _ := host.SigningKeyFingerprint(pub)
	fmt.Fprintf(e.stdout, "wrote the private key %s (keep it secret: it signs plugins) and the public key %s (%s): list it in runtime.trusted_keys\n",
		*out, pubFile, fp)
	return exitOK
}

// writeNew writes a file that must not exist yet.
func writeNew(name string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists; keygen never overwrites a key (choose another --out, or remove it)", name)
	}
	if err != nil {
		return absPathError(err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// sign runs `wasmstream plugin sign --key KEY.pem FILE.wasm [--out
// SIGNED.wasm]`: FILE signed (in place unless --out), a signature it
// already ends with replaced.
func (e *env) sign(args []string) int {
	fs := e.flagSet("plugin sign")
	keyFile := fs.String("key", "", "the Ed25519 private key (PEM, PKCS#8: wasmstream plugin keygen, or openssl genpkey -algorithm ed25519)")
	out := fs.String("out", "", "write the signed module here (default: replace FILE)")
	if err := fs.Parse(args); err != nil {
		return e.flagError("plugin sign", err)
	}
	if *keyFile == "" || fs.NArg() != 1 {
		fmt.Fprintln(e.stderr, "usage: wasmstream plugin sign --key KEY.pem FILE.wasm [--out SIGNED.wasm]")
		return exitUsage
	}
	file := fs.Arg(0)
	fail := func(err error) int {
		fmt.Fprintf(e.stderr, "wasmstream plugin sign: %v\n", err)
		return exitError
	}
	key, err := os.ReadFile(*keyFile)
	if err != nil {
		return fail(absPathError(err))
	}
	wasm, err := readModule(file, host.ByteSize(host.DefaultMaxModuleSize))
	if err != nil {
		return fail(err)
	}
	signed, err := host.SignPlugin(wasm, key)
	if err != nil {
		return fail(fmt.Errorf("%s with %s: %w", file, *keyFile, err))
	}
	dest := file
	if *out != "" {
		dest = *out
	}
	if err := writeReplace(dest, signed); err != nil {
		return fail(err)
	}
	fp, _ := host.SigningKeyFingerprint(key)
	fmt.Fprintf(e.stdout, "signed %s with %s: %s (%d bytes)\n", file, fp, dest, len(signed))
	return exitOK
}

// writeReplace replaces name with data at once (a temporary file renamed
// over it), so a reader never sees half a module.
func writeReplace(name string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return absPathError(err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}
