package translate

import (
	"fmt"
	"io"
)

// source is a buffered reader with a byte-level JSON framer: brace/bracket depth plus string and escape state,
// with no assumption about key order or whitespace.
type source struct {
	r    io.Reader
	buf  []byte
	pos  int
	end  int
	err  error // sticky read error (io.EOF at the end)
	read int64 // bytes consumed, for error offsets
}

func newSource(r io.Reader) *source { return &source{r: r, buf: make([]byte, 32<<10)} }

// fill reads more input; it reports false at the end of input or on error.
func (s *source) fill() bool {
	if s.err != nil {
		return false
	}
	if s.pos == s.end {
		s.pos, s.end = 0, 0
	}
	if s.end == len(s.buf) { // compact
		n := copy(s.buf, s.buf[s.pos:s.end])
		s.pos, s.end = 0, n
	}
	for {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		if err != nil {
			s.err = err
		}
		if n > 0 || err != nil {
			return n > 0
		}
	}
}

// peek skips whitespace and returns the next byte without consuming it.
func (s *source) peek() (byte, error) {
	for {
		for s.pos < s.end {
			if c := s.buf[s.pos]; !isSpace(c) {
				return c, nil
			}
			s.pos++
			s.read++
		}
		if !s.fill() {
			return 0, s.readErr()
		}
	}
}

func (s *source) readErr() error {
	if s.err == nil || s.err == io.EOF {
		return io.EOF
	}
	return s.err
}

func (s *source) consume() { s.pos++; s.read++ }

// expect consumes the next non-space byte, which must be c.
func (s *source) expect(c byte) error {
	got, err := s.peek()
	if err != nil {
		return s.unexpectedEnd(err)
	}
	if got != c {
		return errSyntax(fmt.Sprintf("expected %q, found %q", c, got), int(s.read))
	}
	s.consume()
	return nil
}

func (s *source) unexpectedEnd(err error) error {
	if err == io.EOF {
		return errSyntax("unexpected end of input", int(s.read))
	}
	return err
}

// readValue appends the next JSON value (after whitespace) to dst. It frames only — a value's syntax is checked
// when it is translated — and fails with ReasonTooLarge when the value would exceed max bytes.
func (s *source) readValue(dst []byte, max int) (_ []byte, err error) {
	first, err := s.peek()
	if err != nil {
		return dst, s.unexpectedEnd(err)
	}
	switch first {
	case ',', ':', ']', '}':
		return dst, errSyntax(fmt.Sprintf("expected a value, found %q", first), int(s.read))
	}
	start := len(dst)
	f := framer{scalar: first != '{' && first != '[' && first != '"'}
	if f.scalar {
		defer func() {
			// Scalars are short: check them here, so a framed value is never empty or malformed at the top.
			if err == nil && !validJSON(dst[start:]) {
				err = errSyntax("invalid JSON scalar", int(s.read))
			}
		}()
	}
	for {
		chunk := s.buf[s.pos:s.end]
		i, done := f.scan(chunk)
		if len(dst)-start+i > max {
			return dst, &Error{Reason: ReasonTooLarge, Offset: int(s.read), Err: fmt.Errorf("a JSON value exceeds %d bytes", max)}
		}
		dst = append(dst, chunk[:i]...)
		s.pos += i
		s.read += int64(i)
		if done {
			return dst, nil
		}
		if !s.fill() {
			if f.scalar && s.readErr() == io.EOF {
				return dst, nil // a scalar may end the input
			}
			return dst, s.unexpectedEnd(s.readErr())
		}
	}
}

// framer is readValue's scanning state, kept across the chunks of one value.
type framer struct {
	depth                     int
	inString, escaped, scalar bool
}

// scan returns how many bytes of chunk belong to the value, and whether the value ends within them.
func (f *framer) scan(chunk []byte) (int, bool) {
	for i, c := range chunk {
		if f.inString {
			switch {
			case f.escaped:
				f.escaped = false
			case c == '\\':
				f.escaped = true
			case c == '"':
				f.inString = false
				if f.depth == 0 {
					return i + 1, true
				}
			}
			continue
		}
		if f.scalar {
			if c == ',' || c == '}' || c == ']' || isSpace(c) {
				return i, true
			}
			continue
		}
		switch c {
		case '"':
			f.inString = true
		case '{', '[':
			f.depth++
		case '}', ']':
			f.depth--
			if f.depth == 0 {
				return i + 1, true
			}
		}
	}
	return len(chunk), false
}
