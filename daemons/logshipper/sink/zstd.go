package sink

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
)

// zstdCompressor compresses produce batches as franz-go's own zstd
// compressor does (one goroutine, no empty frames, the given level) but
// without zstd's frame checksum, and with a window as large as a batch.
//
// The checksum was 3.5% of the shipper's CPU and guards nothing a Kafka
// batch does not already: the batch carries a CRC-32C of its compressed
// bytes, which the broker checks, and librdkafka and the Java client write
// their zstd frames without one (the zstd library's default). Any
// consumer's zstd reads frames either way.
//
// franz-go's 64 KiB window cut a batch into 64 KiB blocks, each with its
// own entropy tables; with the window at the largest batch the blocks are
// zstd's largest (128 KiB), and a batch of more than 1 KiB is one
// single-segment frame. A one-shot decoder (franz-go's, librdkafka's)
// needs no memory beyond the batch it decodes; a streaming one (the Java
// client's) holds up to the batch, 1 MiB, as history instead of 64 KiB.
// Each pooled encoder keeps twice the window as history, 2 MiB. On
// batches from the bench that is 7% less zstd CPU and 4% smaller frames
// (docs/benchmarks/logshipper.md).
type zstdCompressor struct {
	encoders sync.Pool
}

func newZstdCompressor(level zstd.EncoderLevel) (*zstdCompressor, error) {
	opts := []zstd.EOption{
		zstd.WithWindowSize(maxBatchBytes),
		zstd.WithEncoderConcurrency(1),
		zstd.WithZeroFrames(true),
		zstd.WithEncoderCRC(false),
		zstd.WithEncoderLevel(level),
	}
	enc, err := zstd.NewWriter(nil, opts...)
	if err != nil {
		return nil, fmt.Errorf("make the zstd encoder: %w", err)
	}
	c := &zstdCompressor{}
	c.encoders.New = func() any {
		enc, _ := zstd.NewWriter(nil, opts...) // the same options worked above
		return enc
	}
	c.encoders.Put(enc)
	return c, nil
}

// Compress implements kgo.Compressor. A broker too old for zstd (produce
// versions before 7, kgo.CompressDisableZstd) gets the batch uncompressed,
// as franz-go's compressor does when zstd is its only codec.
func (c *zstdCompressor) Compress(dst *bytes.Buffer, src []byte, flags ...kgo.CompressFlag) ([]byte, kgo.CompressionCodecType) {
	for _, f := range flags {
		if f == kgo.CompressDisableZstd {
			return src, kgo.CodecNone
		}
	}
	enc := c.encoders.Get().(*zstd.Encoder)
	defer c.encoders.Put(enc)
	if n := enc.MaxEncodedSize(len(src)); n > dst.Cap() {
		dst.Grow(n)
	}
	return enc.EncodeAll(src, dst.Bytes()), kgo.CodecZstd
}
