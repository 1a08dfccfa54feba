package testutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A test that must not let a bomb reach the machine's whole memory (a
// compile bomb, a module estimated wrongly) runs the dangerous part in a
// child: the test binary started again, which runs one named function
// instead of its tests, under an address-space cap (RLIMIT_AS, as
// `prlimit --as` sets it) and a timeout. The package's TestMain calls
// RunChild first.

const (
	childEnv   = "WASMSTREAM_TEST_CHILD"
	childASEnv = "WASMSTREAM_TEST_CHILD_AS"
)

// RunChild is called first thing by the TestMain of a package with
// children: in a child started by Child it caps the process's address
// space, runs the function named by the child's environment and exits
// with its code; in the test process itself it returns.
func RunChild(children map[string]func() int) {
	name := os.Getenv(childEnv)
	if name == "" {
		return
	}
	fn, ok := children[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "testutil: no child %q\n", name)
		os.Exit(125)
	}
	if as, _ := strconv.ParseUint(os.Getenv(childASEnv), 10, 64); as > 0 {
		if err := limitAddressSpace(as); err != nil {
			fmt.Fprintf(os.Stderr, "testutil: RLIMIT_AS: %v\n", err)
			os.Exit(125)
		}
	}
	os.Exit(fn())
}

// ChildResult is what a child did.
type ChildResult struct {
	Code           int // exit code; -1 if killed (a signal, the timeout)
	Stdout, Stderr string
	Wall           time.Duration
	// MaxRSS is the child's peak resident memory in bytes, as the kernel
	// counted it (getrusage's ru_maxrss). It counts from the fork, so it
	// is at least what the test process had resident when it started the
	// child: an upper bound of what the child itself took.
	MaxRSS int64
	// CPU is the user and system time the child used.
	CPU time.Duration
}

// Child runs the test binary as child name under an address-space cap of
// as bytes (0 for none) with env added to its environment, and kills it
// after timeout. It fails t only if the child cannot start.
func Child(t testing.TB, name string, as uint64, timeout time.Duration, env ...string) ChildResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, childEnv+"="+name, childASEnv+"="+strconv.FormatUint(as, 10))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := ChildResult{Wall: time.Since(start), Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
	default:
		t.Fatalf("child %s: %v", name, err)
	}
	if st := cmd.ProcessState; st != nil {
		res.Code = st.ExitCode()
		res.CPU = st.UserTime() + st.SystemTime()
		if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
			res.MaxRSS = maxRSSBytes(ru)
		}
	}
	return res
}

// String is a summary of the result for logs and failures.
func (r ChildResult) String() string {
	s := fmt.Sprintf("exit %d after %v (cpu %v), peak RSS %d MiB", r.Code, r.Wall.Round(time.Millisecond), r.CPU.Round(time.Millisecond), r.MaxRSS>>20)
	if e := strings.TrimSpace(r.Stderr); e != "" {
		if len(e) > 2000 {
			e = e[:2000] + "..."
		}
		s += "; stderr: " + e
	}
	return s
}
