package runner

import (
	"sync"
	"testing"
	"time"
)

// A revoke callback that franz-go's transact session calls under its own
// lock, and that waits for Runner.mu while the loop holds it, must let the
// loop's End (which takes the session's lock) through: it queues itself
// when the End starts. Before, it waited for Runner.mu for good and the
// loop for the session's lock: a member deadlocked, heartbeating, and its
// group's rebalance waited its whole timeout (seen in CI as a member that
// did not stop within 60 s during a rebalance storm).
func TestRevokeWaitingForTheLoopQueuesWhenATransactionEnds(t *testing.T) {
	r := &Runner{}
	c := &exactlyOnce{r: r, endStarts: make(chan struct{})}
	var session sync.Mutex // the GroupTransactSession's failMu

	r.mu.Lock() // the loop, in a commit point
	parts := map[string][]int32{"in": {3}}
	entered := make(chan struct{})
	result := make(chan bool, 1)
	go func() { // franz-go's revoke wrapper
		session.Lock()
		defer session.Unlock()
		close(entered)
		locked := c.lockForCallback(cbRevoked, parts)
		if locked {
			r.mu.Unlock()
		}
		result <- locked
	}()
	<-entered
	// The loop ends the transaction: End takes the session's lock.
	c.setEnding(true)
	ended := make(chan struct{})
	//lint:ignore SA2001 taking the lock is the point: End waits for it
	go func() { session.Lock(); session.Unlock(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("End never got the session's lock: the callback holds it, waiting for Runner.mu")
	}
	c.setEnding(false)
	if locked := <-result; locked {
		t.Fatal("the callback took Runner.mu while the loop held it")
	}
	c.cbMu.Lock()
	queued := c.queued
	c.cbMu.Unlock()
	if len(queued) != 1 || queued[0].kind != cbRevoked || queued[0].parts["in"][0] != 3 {
		t.Fatalf("queued %v, want the revoke of in/3", queued)
	}
	r.mu.Unlock()
}

// A callback waiting for Runner.mu gets it when the loop lets go without
// ending a transaction, and one arriving after an End is over takes the
// lock rather than queuing behind an End that already ran.
func TestCallbackTakesTheLockWhenNoTransactionEnds(t *testing.T) {
	r := &Runner{}
	c := &exactlyOnce{r: r, endStarts: make(chan struct{})}

	r.mu.Lock()
	result := make(chan bool, 1)
	go func() { result <- c.lockForCallback(cbAssigned, nil) }()
	select {
	case <-result:
		t.Fatal("the callback did not wait for the loop")
	case <-time.After(20 * time.Millisecond):
	}
	r.mu.Unlock()
	if !<-result {
		t.Fatal("the callback queued itself though no transaction ended")
	}
	r.mu.Unlock()

	// An End starts and is over while the callback waits: it retries and
	// gets the lock once the loop lets go.
	r.mu.Lock()
	go func() { result <- c.lockForCallback(cbAssigned, nil) }()
	c.setEnding(true)
	c.cbMu.Lock()
	queuedDuringEnd := len(c.queued)
	c.cbMu.Unlock()
	c.setEnding(false)
	r.mu.Unlock()
	if got := <-result; got {
		r.mu.Unlock()
		if queuedDuringEnd != 0 {
			t.Fatal("the callback both queued and took the lock")
		}
	} else {
		c.cbMu.Lock()
		n := len(c.queued)
		c.cbMu.Unlock()
		if n != 1 {
			t.Fatalf("the callback neither took the lock nor queued (queued %d)", n)
		}
	}
}
