package query

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/wasmstream/wasmstream/host/internal/control"
	"github.com/wasmstream/wasmstream/host/internal/kclient"
)

// maxClientAnswer bounds the answer a client reads (a get's value can be
// as large as a record's).
const maxClientAnswer = 64 << 20

// Ask is `wasmstream query`: it finds the process holding the task of key
// (processor's task topic has partitions partitions; partition >= 0 names
// the task instead) from the member records of the app's control topic,
// and GETs the key there, following redirects with the token. It returns
// the HTTP status and the JSON answer.
func Ask(ctx context.Context, kafka kclient.Config, appID, processor, store string, key []byte, partition int32,
	partitions int, params url.Values, token string) (status int, body []byte, err error) {
	r, err := control.NewReader(control.Config{Kafka: kafka, Topic: control.TopicName(appID)})
	if err != nil {
		return 0, nil, err
	}
	defer r.Close()
	st, err := r.Load(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("reading the member records: %w", err)
	}
	if partition < 0 {
		partition = KeyPartition(key, partitions)
	} else {
		params.Set("partition", fmt.Sprint(partition))
	}
	dir := NewDirectory(st.Members())
	base := dir.Owner(processor, partition, "")
	if base == "" {
		// The task has no known process (a rebalance): any process
		// answers, with a 503 or a redirect.
		for _, m := range st.Members() {
			base = m.Address
			break
		}
	}
	if base == "" {
		return 0, nil, errors.New("no process of the app advertises an interactive-query endpoint (query.listen) in the control topic")
	}
	f, err := parseFormat(params.Get("format"))
	if err != nil {
		return 0, nil, err
	}
	k, err := f.encode(key)
	if err != nil {
		return 0, nil, err
	}
	u := base + "/v1/stores/" + url.PathEscape(processor) + "/" + url.PathEscape(store) + "/keys/" + url.PathEscape(k) + "?" + params.Encode()
	c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) > 3 {
			return fmt.Errorf("%d redirects", len(via))
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return nil
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, maxClientAnswer))
	return resp.StatusCode, body, err
}
