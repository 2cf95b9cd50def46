package remotefs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

// responseLimit bounds a JSON response: a page of MaxListLimit infos with
// metadata is bounded by the node's own body limits.
const responseLimit = 64 << 20

// call sends req (JSON, nil for none) to the operation op and decodes the
// JSON answer into out (nil: expect 204).
func (d *Driver) call(ctx context.Context, method, op string, req, out any) error {
	var body []byte
	ctype := ""
	if req != nil {
		b, err := json.Marshal(req)
		if err != nil {
			return fmt.Errorf("lake: encoding a %s request: %w", op, err)
		}
		body, ctype = b, nodeapi.JSONMIMEType
	}
	resp, err := d.do(ctx, method, op, nil, body, ctype)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		return d.errorOf(resp, op)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, responseLimit)).Decode(out); err != nil {
		return fmt.Errorf("%w: reading the answer to %s from %s: %v", metastore.ErrUnavailable, op, d.base, err)
	}
	return nil
}

func (d *Driver) do(ctx context.Context, method, op string, q url.Values, body []byte, ctype string) (*http.Response, error) {
	target := d.target(op, q)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lake: %s %s: %w", method, target, err)
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, r)
	if err != nil {
		return nil, fmt.Errorf("lake: building a request for %s: %w", target, err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if d.auth != "" {
		req.Header.Set("Authorization", d.auth)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("lake: %s %s: %w", method, target, cerr)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w: %s %s: %w (is a node running there? start one with `lake serve`)", metastore.ErrUnavailable, method, target, err)
		}
		return nil, fmt.Errorf("%w: %s %s: %w", metastore.ErrUnavailable, method, target, err)
	}
	return resp, nil
}

// remoteError is an error the node answered, matching its code's sentinel.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

func (d *Driver) errorOf(resp *http.Response, op string) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e nodeapi.Error
	if json.Unmarshal(b, &e) != nil || e.Code == "" {
		what := fmt.Sprintf("%s answered %s to %s", d.base, resp.Status, op)
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return fmt.Errorf("%w: %s", metastore.ErrUnavailable, what)
		}
		return fmt.Errorf("lake: %s, not a lake node's answer (is the URL right?)", what)
	}
	if !strings.HasPrefix(e.Message, "lake: ") {
		e.Message = "lake: " + e.Message
	}
	if e.Code == nodeapi.CodeConflict {
		return &metastore.ConflictError{Key: e.Key, Reason: e.Reason}
	}
	sentinel := nodeapi.Sentinel(e.Code)
	if sentinel == nil {
		return fmt.Errorf("%s (node %s, code %s)", e.Message, d.base, e.Code)
	}
	return &remoteError{msg: e.Message, sentinel: sentinel}
}
