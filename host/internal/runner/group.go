package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/host/internal/kclient"
)

// groupOpts returns the client options of the chosen group protocol.
//
// franz-go uses KIP-848 only when asked (ServerSideBalancer) with a sticky
// or range balancer first; on a broker without KIP-848 it would then fall
// back to the classic protocol with that balancer, which is eager. So the
// runner asks the brokers itself and passes either the KIP-848 options or
// the classic cooperative ones, never both.
func groupOpts(ctx context.Context, kafka kclient.Config, want GroupProtocol, extra []kgo.Opt) ([]kgo.Opt, GroupProtocol, error) {
	if want == ProtocolAuto {
		ok, err := brokersSupport848(ctx, kafka, extra)
		if err != nil {
			return nil, 0, err
		}
		want = ProtocolClassic
		if ok {
			want = ProtocolConsumer
		}
	}
	switch want {
	case ProtocolConsumer:
		return []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())}, want, nil
	case ProtocolClassic:
		return []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}, want, nil
	}
	return nil, 0, fmt.Errorf("group protocol %s: want auto, consumer or classic", want)
}

// brokersSupport848 reports whether every broker answers ConsumerGroupHeartbeat
// v1, the version franz-go's KIP-848 member needs.
func brokersSupport848(ctx context.Context, kafka kclient.Config, extra []kgo.Opt) (bool, error) {
	cl, err := kafka.NewClient(extra...)
	if err != nil {
		return false, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resps := cl.RequestSharded(ctx, kmsg.NewPtrApiVersionsRequest())
	answered := 0
	for _, sh := range resps {
		if sh.Err != nil {
			continue
		}
		resp := sh.Resp.(*kmsg.ApiVersionsResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			continue
		}
		answered++
		ok := false
		for _, k := range resp.ApiKeys {
			if k.ApiKey == int16(kmsg.ConsumerGroupHeartbeat) && k.MaxVersion >= 1 {
				ok = true
			}
		}
		if !ok {
			return false, nil
		}
	}
	if answered == 0 {
		var errs []error
		for _, sh := range resps {
			errs = append(errs, sh.Err)
		}
		return false, fmt.Errorf("asking the brokers which group protocols they support: %w", errors.Join(errs...))
	}
	return true, nil
}
