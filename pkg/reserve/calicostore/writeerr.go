package calicostore

import (
	"context"
	"errors"
	"net/http"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// writeError is a create or an update of a reservation object that
// failed; mayHaveLanded says whether it may have been applied all the same.
type writeError struct {
	name string
	err  error
}

func (e *writeError) Error() string {
	return "writing reservation object " + e.name + ": " + e.err.Error()
}

func (e *writeError) Unwrap() error { return e.err }

// mayHaveLanded reports whether err is a write that may have been applied:
// sent, with no answer (its context ended, its connection dropped), or
// failed in the datastore's midst (the API server's 500 or 504, an etcd
// error). A refusal is an answer, and so is a throttle: a conflict, a
// validation error, forbidden, any other status the API server gave.
func mayHaveLanded(err error) bool {
	var we *writeError
	if !errors.As(err, &we) {
		return false // a read failed, or a delete: no write of entries in doubt
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return true
	case retriable(err), errors.As(err, new(cerrors.ErrorValidation)), errors.As(err, new(cerrors.ErrorConnectionUnauthorized)),
		errors.As(err, new(cerrors.ErrorOperationNotSupported)), errors.As(err, new(cerrors.ErrorInsufficientIdentifiers)):
		return false
	}
	var status *apierrors.StatusError
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == http.StatusInternalServerError || code == http.StatusGatewayTimeout
	}
	return true // no answer the store can read as one
}
