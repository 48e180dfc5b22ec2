package definition

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is wrapped by every error that reports a bad definition.
var ErrInvalid = errors.New("invalid cluster definition")

// Error is one problem in a definition, with where it is.
type Error struct {
	Source  source
	Field   string
	Message string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source.String())
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Errors is every problem found in a definition, reported in one pass.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, 0, len(es)+1)
	lines = append(lines, fmt.Sprintf("%d problem(s) in cluster definition:", len(es)))
	for _, e := range es {
		lines = append(lines, "  "+e.Error())
	}
	return strings.Join(lines, "\n")
}

// Is makes errors.Is(err, ErrInvalid) true for every definition error.
func (es Errors) Is(target error) bool { return target == ErrInvalid }
