package fsync

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"

	"golang.org/x/sys/unix"
)

// A record file holds one small state that is rewritten often (a read
// position after every acknowledged batch), durably and without creating
// a file each time. It has two slots; each write goes, in place, into the
// slot that does not hold the last durable record, and is flushed with
// fdatasync. A crash in the middle of a write leaves that slot torn and
// the other one intact, so a reader gets the new record or the one before
// it, as with Replace, for one write and one flush instead of a file
// creation, a rename and two flushes.
//
// Layout (little endian), in 4 KiB blocks so that a write into one slot
// shares no disk sector or page with the header or the other slot:
//
//	header  at 0, 4 KiB:     "trellisR" | slot size uint32 | CRC-32C of the 12 bytes before | zeros
//	slot 0  at 4 KiB:        seq uint64 | length uint32 | CRC-32C of seq, length, data | data | zeros
//	slot 1  at 4 KiB + size: the same
//
// The header is only ever written by Replace (when the file is made, or
// remade with larger slots), never in place.
const (
	recordMagic   = "trellisR"
	recordHeader  = 4096
	slotHeader    = 16
	minRecordSlot = 4096 // slot sizes are powers of two from here
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped when a record file has no intact record.
var ErrCorrupt = errors.New("no intact record")

// ReadRecord returns the newest intact record in path and its sequence
// number. A file not in the record format (written by Replace, before the
// state moved to a record file) is returned whole, with sequence 0. A
// missing file is fs.ErrNotExist.
func ReadRecord(path string) ([]byte, uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, fmt.Errorf("read the record file: %w", err)
	}
	if !bytes.HasPrefix(b, []byte(recordMagic)) {
		return b, 0, nil
	}
	if len(b) < 16 || crc32.Checksum(b[:12], castagnoli) != binary.LittleEndian.Uint32(b[12:16]) {
		return nil, 0, fmt.Errorf("record file %s: header: %w", path, ErrCorrupt)
	}
	size := int(binary.LittleEndian.Uint32(b[8:12]))
	var (
		best  []byte
		seq   uint64
		found bool
	)
	for i := range 2 {
		data, s, ok := readSlot(b, recordHeader+i*size, size)
		// A slot holds only the sequence numbers of its parity: anything
		// else is not a record this format wrote there.
		if ok && int(s%2) == i && (!found || s > seq) {
			best, seq, found = data, s, true
		}
	}
	if !found {
		return nil, 0, fmt.Errorf("record file %s: both slots torn: %w", path, ErrCorrupt)
	}
	return best, seq, nil
}

func readSlot(b []byte, off, size int) ([]byte, uint64, bool) {
	if size < slotHeader || off+size > len(b) {
		return nil, 0, false
	}
	s := b[off : off+size]
	n := int(binary.LittleEndian.Uint32(s[8:12]))
	if n > size-slotHeader {
		return nil, 0, false
	}
	if slotCRC(s[:12], s[slotHeader:slotHeader+n]) != binary.LittleEndian.Uint32(s[12:16]) {
		return nil, 0, false
	}
	return s[slotHeader : slotHeader+n], binary.LittleEndian.Uint64(s[:8]), true
}

// RecordWriter writes the records of one file. It is not safe for
// concurrent use.
type RecordWriter struct {
	path string
	mode os.FileMode
	f    *os.File
	size int    // slot size of the open file
	seq  uint64 // of the last record written
	buf  []byte
}

// NewRecordWriter returns a writer that continues after sequence number
// seq (from ReadRecord; 0 for a new file). Nothing is written until the
// first Write, which makes the file anew (with Replace): a file in another
// format, or one a crash left with a torn slot, is replaced whole.
func NewRecordWriter(path string, mode os.FileMode, seq uint64) *RecordWriter {
	return &RecordWriter{path: path, mode: mode, seq: seq}
}

// Write makes data the file's record, durably: when it returns nil, a
// crash leaves data or a later record. When it fails, the file holds the
// record before, and the next Write makes the file anew.
func (w *RecordWriter) Write(data []byte) error {
	w.seq++
	if w.f == nil || len(data) > w.size-slotHeader {
		return w.remake(data)
	}
	w.buf = appendSlot(w.buf[:0], w.seq, data)
	off := int64(recordHeader + int(w.seq%2)*w.size)
	if _, err := w.f.WriteAt(w.buf, off); err != nil {
		w.drop()
		return fmt.Errorf("write the record to %s: %w", w.path, err)
	}
	if err := unix.Fdatasync(int(w.f.Fd())); err != nil {
		// After a failed flush the page cache may no longer say what the
		// disk holds: never write into this file again.
		w.drop()
		return fmt.Errorf("flush the record to %s: %w", w.path, err)
	}
	return nil
}

// remake writes a new file holding data (in its slot) with slots large
// enough for twice its size, replacing path atomically, and opens it.
func (w *RecordWriter) remake(data []byte) error {
	w.drop()
	size := minRecordSlot
	for size-slotHeader < 2*len(data) {
		size *= 2
	}
	file := make([]byte, recordHeader+2*size)
	copy(file, recordMagic)
	binary.LittleEndian.PutUint32(file[8:12], uint32(size))
	binary.LittleEndian.PutUint32(file[12:16], crc32.Checksum(file[:12], castagnoli))
	copy(file[recordHeader+int(w.seq%2)*size:], appendSlot(nil, w.seq, data))
	if err := Replace(w.path, file, w.mode); err != nil {
		return fmt.Errorf("write the record file %s: %w", w.path, err)
	}
	f, err := os.OpenFile(w.path, os.O_RDWR, 0)
	if err != nil {
		// The record is durable; the next Write makes the file again.
		return nil
	}
	w.f, w.size = f, size
	return nil
}

func appendSlot(b []byte, seq uint64, data []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, seq)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
	b = binary.LittleEndian.AppendUint32(b, slotCRC(b[len(b)-12:], data))
	return append(b, data...)
}

// slotCRC is a slot's checksum: of its sequence number and length (head,
// 12 bytes), then its data.
func slotCRC(head, data []byte) uint32 {
	return crc32.Update(crc32.Checksum(head, castagnoli), castagnoli, data)
}

func (w *RecordWriter) drop() {
	if w.f != nil {
		_ = w.f.Close()
		w.f = nil
	}
}

// Close closes the file; a later Write makes it anew.
func (w *RecordWriter) Close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	if err != nil {
		return fmt.Errorf("close the record file %s: %w", w.path, err)
	}
	return nil
}
