package sink

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestZstdCompressorFrames: a batch comes out as one zstd frame without
// the content checksum, that the standard decoder reads back byte for byte;
// a broker too old for zstd gets the batch as it is.
func TestZstdCompressorFrames(t *testing.T) {
	c, err := newZstdCompressor(zstd.SpeedFastest)
	if err != nil {
		t.Fatal(err)
	}
	var src []byte
	for i := range 20000 {
		r := Record{Log: "GET /api/v1/items 200", Identity: &Identity{Namespace: "shop", Pod: "web-1", Container: "app", UID: "u1"}}
		r.Log += string(rune('a' + i%26))
		src = r.AppendJSON(src)
	}
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	for range 3 { // the pooled encoder, reused
		var dst bytes.Buffer
		out, codec := c.Compress(&dst, src)
		if codec != kgo.CodecZstd {
			t.Fatalf("codec %v, want zstd", codec)
		}
		if binary.LittleEndian.Uint32(out) != 0xFD2FB528 {
			t.Fatalf("no zstd frame: % x", out[:8])
		}
		if fhd := out[4]; fhd&0x04 != 0 {
			t.Fatalf("frame header descriptor %08b: the content checksum flag is set", fhd)
		}
		back, err := dec.DecodeAll(out, nil)
		if err != nil || !bytes.Equal(back, src) {
			t.Fatalf("decoded %d bytes of %d (%v)", len(back), len(src), err)
		}
		t.Logf("%d bytes -> %d", len(src), len(out))
	}
	// A batch as large as the sink produces is one single-segment frame:
	// its window is the batch, and a decoder needs no more memory.
	for len(src) > maxBatchBytes {
		src = src[:len(src)/2]
	}
	out, _ := c.Compress(new(bytes.Buffer), src)
	if fhd := out[4]; fhd&0x20 == 0 {
		t.Fatalf("a %d-byte batch: frame header descriptor %08b, not single-segment", len(src), fhd)
	}
	if back, err := dec.DecodeAll(out, nil); err != nil || !bytes.Equal(back, src) {
		t.Fatalf("decoded %d bytes of %d (%v)", len(back), len(src), err)
	}
	if out, codec := c.Compress(new(bytes.Buffer), src, kgo.CompressDisableZstd); codec != kgo.CodecNone || !bytes.Equal(out, src) {
		t.Fatalf("with zstd disabled: codec %v, %d bytes", codec, len(out))
	}
}
