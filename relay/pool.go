package relay

import (
	"sync"

	"modelgate/translate"
)

// A chat stream spends most of its life waiting for the platform's next event. What it
// needs only while it converts one (the converter's working memory and the buffer the
// chunks are written into) is lent from these pools for that moment, so a thousand open
// streams do not each hold a copy through every wait. Pools are shared caches, not state:
// what they hand out carries nothing from its last user.
var (
	convScratch = sync.Pool{New: func() any { return new(translate.Scratch) }}
	chunkBufs   = sync.Pool{New: func() any { b := make([]byte, 0, chunkBufSize); return &b }}
)

const (
	chunkBufSize = 512 // a typical event's chunks with room to spare
	// maxKeptChunkBuf bounds the buffers returned to the pool: a rare large chunk (a whole
	// answer sent at the end) is left to the collector rather than kept.
	maxKeptChunkBuf = 16 << 10
)

// feedPooled converts one upstream event into a pooled buffer; the caller returns it with
// putChunkBuf once out has been written (or dropped).
func feedPooled(conv translate.Converter, eventType string, data []byte) (buf *[]byte, out []byte, done bool) {
	scratch := convScratch.Get().(*translate.Scratch)
	buf = chunkBufs.Get().(*[]byte)
	out, done = conv.FeedWith(scratch, (*buf)[:0], eventType, data)
	convScratch.Put(scratch)
	return buf, out, done
}

// putChunkBuf returns buf, which out (its last contents) may have outgrown; nil is ignored.
func putChunkBuf(buf *[]byte, out []byte) {
	if buf == nil || cap(out) > maxKeptChunkBuf {
		return
	}
	*buf = out[:0]
	chunkBufs.Put(buf)
}
