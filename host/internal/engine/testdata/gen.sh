#!/bin/sh
# Regenerates the .wasm test plugins from their .wat sources and the two
# broken inputs. Needs wat2wasm (Debian: apt-get update && apt-get install wabt)
# and python3. Run from anywhere; commit the .wat and .wasm files together.
set -eu
cd "$(dirname "$0")"
# hostile.wat and bulkline.wat are generated (long repetitive code): the
# Python script is their source; they are compiled below, then removed.
python3 gen_hostile.py
for f in *.wat; do
	b=${f%.wat}
	if [ "$b" = escape ]; then
		# escape.wat is deliberately invalid (it names a global it does not define).
		wat2wasm --no-check "$f" -o "$b.wasm"
	else
		wat2wasm "$f" -o "$b.wasm"
	fi
done
rm hostile.wat bulkline.wat
# corrupt.wasm: 256 pseudo-random bytes (fixed seed), not a Wasm module at all.
python3 -c 'import random; random.seed(1); open("corrupt.wasm", "wb").write(bytes(random.randrange(256) for _ in range(256)))'
# truncated.wasm: the first 100 bytes of passthrough.wasm.
head -c 100 passthrough.wasm > truncated.wasm
