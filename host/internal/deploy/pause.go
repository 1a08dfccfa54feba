package deploy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wasmstream/wasmstream/host/internal/control"
)

// PauseResult is what SetPause published.
type PauseResult struct {
	Processor string
	Paused    bool
	// Topic is the control topic; Offset the pause record's offset (-1:
	// nothing published, the processor was already so).
	Topic  string
	Offset int64
}

// ErrSamePause is returned (wrapped) by SetPause when the processor is
// already paused (or resumed) in the control topic: nothing was published.
var ErrSamePause = control.ErrSamePause

// SetPause pauses (paused true) or resumes processor in the control topic
// of app. Every running process applies it to its tasks at their next
// commit point; a process that starts later starts so.
func SetPause(ctx context.Context, app App, processor string, paused bool) (PauseResult, error) {
	res := PauseResult{Processor: processor, Paused: paused, Topic: control.TopicName(app.AppID), Offset: -1}
	if _, err := findProcessor(app, processor); err != nil {
		return res, err
	}
	what := "resume"
	if paused {
		what = "pause"
	}
	if err := NeedBrokers(app, what); err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	// A pause creates the topic (an app may be paused before any
	// deploy); a resume of an app that has none has nothing to resume.
	pub, _, err := openControl(ctx, app, paused)
	if err != nil {
		return res, err
	}
	defer pub.Close()
	p, err := pub.SetPause(ctx, processor, paused, control.Deployer())
	switch {
	case errors.Is(err, control.ErrSamePause):
		state := "not paused"
		if p.Paused {
			state = fmt.Sprintf("paused since %s by %s", p.At.Format(time.RFC3339), p.By)
		}
		return res, &markedError{fmt.Sprintf("processor %q is %s: nothing published", processor, state), control.ErrSamePause}
	case err != nil:
		return res, fmt.Errorf("processor %q: %w", processor, err)
	}
	res.Offset = p.Offset
	return res, nil
}
