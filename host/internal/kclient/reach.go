package kclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Backoff between tries of Reach: the first wait, and the most any wait
// grows to (doubling).
const (
	reachFirstBackoff = 250 * time.Millisecond
	reachMaxBackoff   = 5 * time.Second
	// reachTryTimeout bounds one try: a broker that accepts connections
	// but does not answer counts as unreachable for that try.
	reachTryTimeout = 10 * time.Second
)

// Reach waits until the brokers answer a metadata request, so that a
// process started while its cluster is down (a broker restart, an outage,
// a process that starts first under a supervisor) waits for it instead of
// exiting at once. It tries, then waits with backoff (250ms doubling to
// 5s), for at most wait in all; each failed try is logged at warn saying
// what it waits for. An error that retrying cannot fix (a refused
// authentication, a certificate not trusted: anything but a connection
// that could not be made) is returned at once, as it is, for the caller to
// explain. Giving up returns an *UnreachableError. ctx ends the wait early
// (a SIGTERM during startup).
func Reach(ctx context.Context, c Config, wait time.Duration, log *slog.Logger) error {
	deadline := time.Now().Add(wait)
	backoff := reachFirstBackoff
	brokers := strings.Join(c.Brokers, ",")
	for try := 1; ; try++ {
		err := reachOnce(ctx, c)
		if err == nil {
			if try > 1 {
				log.Info("kafka: brokers reachable", "brokers", brokers, "tries", try)
			}
			return nil
		}
		if ctx.Err() != nil {
			return &UnreachableError{Brokers: brokers, Tries: try, Err: err, Stopped: true}
		}
		if !retriable(err) {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return &UnreachableError{Brokers: brokers, Waited: wait, Tries: try, Err: err}
		}
		pause := min(backoff, left)
		log.Warn("waiting for the Kafka brokers", "brokers", brokers, "err", err,
			"retry_in", pause.Round(time.Millisecond), "give_up_in", left.Round(time.Second))
		select {
		case <-ctx.Done():
			return &UnreachableError{Brokers: brokers, Tries: try, Err: err, Stopped: true}
		case <-time.After(pause):
		}
		backoff = min(2*backoff, reachMaxBackoff)
	}
}

// reachOnce asks the brokers for their metadata once.
func reachOnce(ctx context.Context, c Config) error {
	cl, err := c.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, reachTryTimeout)
	defer cancel()
	_, err = kadm.NewClient(cl).BrokerMetadata(ctx)
	return err
}

// UnreachableError is Reach giving up: no broker could be dialed within
// the wait, or the wait was stopped.
type UnreachableError struct {
	Brokers string
	Waited  time.Duration
	Tries   int
	Stopped bool  // ctx ended the wait
	Err     error // the last dial's error
}

func (e *UnreachableError) Error() string {
	if e.Stopped {
		return fmt.Sprintf("cannot reach Kafka at %s: stopped while waiting: %v", e.Brokers, e.Err)
	}
	return fmt.Sprintf("cannot reach Kafka at %s (gave up after %s, %d tries; kafka.connect_timeout): %v", e.Brokers, e.Waited, e.Tries, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// retriable reports whether waiting may fix err: a dial that failed
// (refused, unresolvable, timed out), so nothing was learned about the
// brokers or the security settings. A connection that was made and then
// failed (TLS, SASL, a hang-up) is not retried: it repeats until the
// config changes.
func retriable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
