// Package bareerr is the classifier's fixture: every function whose name
// starts with Bad passes a foreign error up bare (one finding each, on the
// line marked "want"); every other function does not.
package bareerr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

func BadOpen(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // want os.Open
	}
	return f, nil
}

func BadIfInit(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err // want json.Unmarshal
	}
	return nil
}

func BadMethod(f *os.File) error {
	_, err := f.Write([]byte("x"))
	return err // want os.File.Write
}

func BadReassigned(path string) error {
	err := readLocal(path)
	if err != nil {
		return err
	}
	err = os.Remove(path)
	return err // want os.Remove
}

func BadClosure() func() (int, error) {
	return func() (int, error) {
		n, err := strconv.Atoi("x")
		return n, err // want strconv.Atoi
	}
}

func GoodWrapped(path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	return nil
}

// GoodLocal passes up an error readLocal already wrapped.
func GoodLocal(path string) error {
	if err := readLocal(path); err != nil {
		return err
	}
	return nil
}

// GoodParam passes up what its caller handed it.
func GoodParam(err error) error { return err }

// GoodFuncValue calls a function value: its maker is unknown here.
func GoodFuncValue(fn func() error) error {
	err := fn()
	return err
}

func readLocal(path string) error {
	if _, err := os.ReadFile(path); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// GoodMade returns errors made here and a context's cancellation.
func GoodMade(ctx context.Context, a, b error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if a == nil {
		err := errors.New("no a")
		return err
	}
	err := errors.Join(a, b)
	return err
}

// countingBody decorates a body: its Close passes up the Close it wraps.
type countingBody struct {
	io.ReadCloser
	closed int
}

func (b *countingBody) Close() error {
	err := b.ReadCloser.Close()
	b.closed++
	return err
}

// BadDelegate is not a decorator's method: it names no object.
func BadDelegate(b io.ReadCloser) error {
	err := b.Close()
	return err // want io.Closer.Close
}
