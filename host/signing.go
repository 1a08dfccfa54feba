package host

import (
	"crypto/ed25519"

	"github.com/wasmstream/wasmstream/host/internal/signature"
)

// Plugins can be signed (abi/ABI.md section 11): with runtime.trusted_keys
// set, every module the host compiles must carry a signature of one of
// those keys over its bytes.

// SignPlugin returns wasm signed with the Ed25519 private key in keyPEM
// (PEM "PRIVATE KEY", PKCS#8, as NewSigningKey and `openssl genpkey
// -algorithm ed25519` write it): wasm without a signature section it ends
// with, then a new one. A module with a signature section elsewhere, or
// two, is refused: sign the original.
func SignPlugin(wasm, keyPEM []byte) ([]byte, error) {
	key, err := signature.ParsePrivateKey(keyPEM)
	if err != nil {
		return nil, err
	}
	return signature.Sign(wasm, key)
}

// NewSigningKey makes an Ed25519 key pair for SignPlugin: the private key
// as PEM "PRIVATE KEY" (PKCS#8), the public one, which
// runtime.trusted_keys names, as PEM "PUBLIC KEY".
func NewSigningKey() (privatePEM, publicPEM []byte, err error) {
	return signature.GenerateKey()
}

// SigningKeyFingerprint names the public key of a private or public key
// PEM as error messages and `plugin inspect` do ("ed25519:" and 16 hex
// digits).
func SigningKeyFingerprint(keyPEM []byte) (string, error) {
	if keys, err := signature.ParsePublicKeys(keyPEM); err == nil {
		return signature.KeyFingerprint(keys[0]), nil
	}
	key, err := signature.ParsePrivateKey(keyPEM)
	if err != nil {
		return "", err
	}
	return signature.KeyFingerprint(key.Public().(ed25519.PublicKey)), nil
}

// pluginSignature fills info's signature fields from wasm.
func pluginSignature(info *PluginInfo, wasm []byte) {
	signed, sig, err := signature.Split(wasm)
	switch {
	case err != nil:
		info.SignatureProblem = err.Error()
	case sig != nil:
		info.Signer = sig.Fingerprint()
		if !ed25519.Verify(sig.Key, signature.Message(signed), sig.Sig) {
			info.SignatureProblem = "the signature does not match the module's bytes (changed after signing)"
		}
	}
}
