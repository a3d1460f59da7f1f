package translate

import (
	"bytes"
	"io"
)

// Separators written by the streamer (package-level, so writing them does not allocate).
var (
	sepComma, sepColon, sepNewline = []byte{','}, []byte{':'}, []byte{'\n'}
	sepOpen, sepClose              = []byte{'{'}, []byte{'}'}
	sepArrOpen, sepArrClose        = []byte{'['}, []byte{']'}
)

// MaxObjectSize caps one unit (an object, a list item, a watch frame) at 8 MiB: memory stays bounded by the largest
// object, whatever the size of a list.
const MaxObjectSize = 8 << 20

// StreamStats counts what ResponseStream did.
type StreamStats struct {
	Items      int  // list items or Table rows seen
	Translated int  // units that took the slow path (decoded), envelope included
	Dropped    int  // items or rows dropped (platform CRDs)
	Drop       bool // the body as a whole is a platform CRD: nothing was written, answer 404
}

// ResponseStream translates a JSON response body of any size from src to dst, item by item: the members of
// items[] (and of rows[] in a Table) are framed and translated one at a time, each passed through untouched when
// the fast-path check finds no needle, so memory is bounded by the largest item (maxObject, MaxObjectSize if 0),
// not by the list. The other top-level members (kind, apiVersion, metadata, ...) are translated as a partial
// object. A body without items is translated as one unit. Output whitespace between top-level tokens is
// normalised; every item's bytes are its own.
//
// On error, part of the output may have been written: the proxy must then abort the response (it cannot change
// the status line any more), so it should buffer small bodies and use ResponseObject for them instead.
func (t *Translator) ResponseStream(dst io.Writer, src io.Reader, ctx Context, maxObject int) (StreamStats, error) {
	if maxObject <= 0 {
		maxObject = MaxObjectSize
	}
	st := &streamer{t: t, ctx: ctx, max: maxObject, src: newSource(src), w: dst}
	err := st.run()
	return st.stats, err
}

type streamer struct {
	t     *Translator
	ctx   Context
	max   int
	src   *source
	w     io.Writer
	stats StreamStats

	env      []byte // buffered top-level members, as an object: {"k":v,"k2":v2
	envN     int    // members in env
	opened   bool   // the opening brace has been written (an array was streamed)
	wrote    bool   // a top-level member has been written
	isTable  bool   // the envelope so far says kind Table
	item     []byte // reused item buffer
	out      []byte // reused translation buffer
	keyBuf   []byte
	writeErr error
}

func (st *streamer) write(b []byte) {
	if st.writeErr == nil {
		_, st.writeErr = st.w.Write(b)
	}
}

func (st *streamer) run() error {
	s := st.src
	c, err := s.peek()
	if err != nil {
		return s.unexpectedEnd(err)
	}
	if c != '{' {
		// Not an object: one bounded unit.
		v, err := s.readValue(nil, st.max)
		if err != nil {
			return err
		}
		if err := st.unit(v, sTop); err != nil {
			return err
		}
		return st.trailer()
	}
	s.consume()
	st.env = append(st.env[:0], '{')
	for first := true; ; first = false {
		key, end, err := st.memberName(first)
		if err != nil {
			return err
		}
		if end {
			break
		}
		if err := st.member(key); err != nil {
			return err
		}
	}
	if !st.opened {
		// No array: the body is one object, translated as a unit (bounded like any unit).
		if err := st.unit(append(st.env, '}'), sTop); err != nil {
			return err
		}
		return st.trailer()
	}
	if err := st.flushEnvelope(); err != nil {
		return err
	}
	st.write(sepClose)
	return st.trailer()
}

// memberName reads the separator and the name of the next top-level member (end: the object closed instead).
func (st *streamer) memberName(first bool) (key string, end bool, err error) {
	s := st.src
	c, err := s.peek()
	if err != nil {
		return "", false, s.unexpectedEnd(err)
	}
	if c == '}' {
		s.consume()
		return "", true, nil
	}
	if !first {
		if c != ',' {
			return "", false, errSyntax("expected ',' or '}'", int(s.read))
		}
		s.consume()
	}
	if c, err = s.peek(); err != nil {
		return "", false, s.unexpectedEnd(err)
	}
	if c != '"' {
		return "", false, errSyntax("expected member name", int(s.read))
	}
	if st.keyBuf, err = s.readValue(st.keyBuf[:0], st.max); err != nil {
		return "", false, err
	}
	if err := s.expect(':'); err != nil {
		return "", false, err
	}
	return string(st.keyBuf), false, nil
}

// member streams items[] (and a Table's rows[]) element by element; any other member is buffered (bounded) into
// the envelope, to be translated with its siblings.
func (st *streamer) member(key string) error {
	s := st.src
	c, err := s.peek()
	if err != nil {
		return s.unexpectedEnd(err)
	}
	if c == '[' && (key == `"items"` || key == `"rows"` && st.isTable) {
		elem := sTop
		if key == `"rows"` {
			elem = sRow
		}
		return st.streamArray(elem)
	}
	if st.envN > 0 {
		st.env = append(st.env, ',')
	}
	st.env = append(st.env, st.keyBuf...)
	st.env = append(st.env, ':')
	vs := len(st.env)
	if st.env, err = s.readValue(st.env, st.max-len(st.env)); err != nil {
		return err
	}
	if key == `"kind"` && string(st.env[vs:]) == `"Table"` {
		st.isTable = true
	}
	st.envN++
	return nil
}

// streamArray writes the envelope so far, then the array member named by keyBuf, element by element.
func (st *streamer) streamArray(elem state) error {
	if !st.opened {
		st.write(sepOpen)
		st.opened = true
	}
	if err := st.flushEnvelope(); err != nil {
		return err
	}
	if st.wrote {
		st.write(sepComma)
	}
	st.write(st.keyBuf)
	st.write(sepColon)
	if err := st.array(elem); err != nil {
		return err
	}
	st.wrote = true
	return nil
}

// trailer copies trailing whitespace and rejects anything else.
func (st *streamer) trailer() error {
	s := st.src
	if _, err := s.peek(); err == nil {
		return errSyntax("data after the top-level value", int(s.read))
	} else if err != io.EOF {
		return err
	}
	if !st.stats.Drop {
		st.write(sepNewline)
	}
	return st.writeErr
}

// flushEnvelope translates and writes the buffered members.
func (st *streamer) flushEnvelope() error {
	if st.envN == 0 {
		return nil
	}
	env := append(st.env, '}')
	res, err := st.translate(env, sTop)
	if err != nil {
		return err
	}
	if res.Translated {
		st.stats.Translated++
	}
	body := res.Body[1 : len(res.Body)-1] // the translated members, without braces
	if st.wrote {
		st.write(sepComma)
	}
	st.write(body)
	st.wrote = true
	st.env, st.envN = append(env[:0], '{'), 0
	return nil
}

// array streams the elements of the array at the source.
func (st *streamer) array(elem state) error {
	s := st.src
	if err := s.expect('['); err != nil {
		return err
	}
	st.write(sepArrOpen)
	written := false
	for first := true; ; first = false {
		c, err := s.peek()
		if err != nil {
			return s.unexpectedEnd(err)
		}
		if c == ']' {
			s.consume()
			st.write(sepArrClose)
			return st.writeErr
		}
		if !first {
			if c != ',' {
				return errSyntax("expected ',' or ']'", int(s.read))
			}
			s.consume()
		}
		if st.item, err = s.readValue(st.item[:0], st.max); err != nil {
			return err
		}
		st.stats.Items++
		res, err := st.translate(st.item, elem)
		if err != nil {
			return err
		}
		if res.Translated {
			st.stats.Translated++
		}
		if res.Drop {
			st.stats.Dropped++
			continue
		}
		if written {
			st.write(sepComma)
		}
		st.write(res.Body)
		written = true
		if st.writeErr != nil {
			return st.writeErr
		}
	}
}

// unit translates and writes one whole unit.
func (st *streamer) unit(v []byte, top state) error {
	res, err := st.translate(v, top)
	if err != nil {
		return err
	}
	if res.Translated {
		st.stats.Translated++
	}
	if res.Drop {
		st.stats.Drop = true
		return nil
	}
	st.write(res.Body)
	return st.writeErr
}

// translate is responseUnit with the streamer's reusable output buffer: the result is valid until the next call.
func (st *streamer) translate(unit []byte, top state) (Result, error) {
	if !st.t.needsResponse(unit) {
		return Result{Body: unit}, nil
	}
	w := rewriter{t: st.t, dir: DirectionResponse, crd: st.ctx.CRD, in: unit, scratch: st.out}
	res, err := w.run(top)
	if err == nil && res.Changed && cap(res.Body) > cap(st.out) {
		st.out = res.Body[:0] // keep the grown buffer
	}
	return res, err
}

// responseUnit is the fast path plus the rule, for any top state.
func (t *Translator) responseUnit(unit []byte, top state, ctx Context) (Result, error) {
	if !t.needsResponse(unit) {
		return Result{Body: unit}, nil
	}
	return t.rewrite(DirectionResponse, unit, top, ctx)
}

// FrameReader splits a JSON watch stream (one event object after another, usually newline separated) into
// frames, like client-go's framer.NewJSONFramedReader but bounded: a frame larger than the cap fails with
// ReasonTooLarge instead of being buffered whole by a json.Decoder.
type FrameReader struct {
	src *source
	max int
	buf []byte
}

// NewFrameReader reads frames from r, each at most max bytes (MaxObjectSize if 0).
func NewFrameReader(r io.Reader, max int) *FrameReader {
	if max <= 0 {
		max = MaxObjectSize
	}
	return &FrameReader{src: newSource(r), max: max}
}

// Next returns the next frame, valid until the following call; io.EOF at the end of the stream.
func (f *FrameReader) Next() ([]byte, error) {
	if _, err := f.src.peek(); err != nil {
		return nil, err
	}
	var err error
	f.buf, err = f.src.readValue(f.buf[:0], f.max)
	if err != nil {
		return nil, err
	}
	if f.buf[0] != '{' {
		return nil, newError(ReasonInvalidWatchEvent, int(f.src.read), "a watch frame is a JSON object")
	}
	return f.buf, nil
}

// ResponseWatchEvent translates one watch event frame ({"type":…,"object":…}): the object through the rule
// (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR alike; an ERROR's Status gets details.group and messages). A
// BOOKMARK's kubernetes.io/initial-events-list-blueprint annotation is removed. On a CRD watch, events of
// platform CRDs of mapped groups yield Drop. A frame without needles is returned as is.
func (t *Translator) ResponseWatchEvent(frame []byte, ctx Context) (Result, error) {
	if !t.needsResponse(frame) {
		return Result{Body: frame}, nil
	}
	if p := skipWS(frame, 0); p >= len(frame) || frame[p] != '{' {
		return Result{}, newError(ReasonInvalidWatchEvent, p, "a watch event is a JSON object")
	}
	return t.rewrite(DirectionResponse, frame, sEvent, ctx)
}

// ErrorEvent is the watch frame the proxy sends when a frame fails to translate: an ERROR event with a 500 Status,
// after which it ends the stream so the client relists (untranslated bytes never reach a client). It ends with a
// newline.
func ErrorEvent(err error) []byte {
	msg := "capi-private proxy: watch event could not be translated"
	if err != nil {
		msg += ": " + err.Error()
	}
	var b bytes.Buffer
	b.WriteString(`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":`)
	b.Write(appendQuoted(nil, msg))
	b.WriteString(`,"reason":"InternalError","code":500}}` + "\n")
	return b.Bytes()
}
