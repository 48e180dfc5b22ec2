package fsync

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func mustRead(t *testing.T, path string) (string, uint64) {
	t.Helper()
	b, seq, err := ReadRecord(path)
	if err != nil {
		t.Fatalf("ReadRecord: %v", err)
	}
	return string(b), seq
}

func TestRecordRoundTripAndGrowth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	if _, _, err := ReadRecord(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v, want fs.ErrNotExist", err)
	}
	w := NewRecordWriter(path, 0o600, 0)
	defer w.Close()
	// Small records, then one past the first slot size (the file is made
	// anew with larger slots), then small ones again.
	for i, data := range []string{"a", "bb", "ccc", strings.Repeat("x", 3*minRecordSlot), "d", "", "eeee"} {
		if err := w.Write([]byte(data)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		got, seq := mustRead(t, path)
		if got != data || seq != uint64(i+1) {
			t.Fatalf("after write %d: %d bytes at seq %d, want %d bytes at seq %d", i, len(got), seq, len(data), i+1)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	if want := int64(recordHeader + 2*8*minRecordSlot); fi.Size() != want {
		t.Errorf("size %d after growth, want %d (slots for twice the largest record)", fi.Size(), want)
	}
}

// A file written whole by Replace (the format before record files) is
// read whole, and the first Write replaces it with a record file.
func TestRecordReadsAndReplacesAPlainFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := Replace(path, []byte(`{"positions":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	got, seq := mustRead(t, path)
	if got != `{"positions":[]}` || seq != 0 {
		t.Fatalf("plain file read as %q at seq %d", got, seq)
	}
	w := NewRecordWriter(path, 0o600, seq)
	defer w.Close()
	if err := w.Write([]byte("new")); err != nil {
		t.Fatal(err)
	}
	if got, seq := mustRead(t, path); got != "new" || seq != 1 {
		t.Fatalf("after the first write: %q at seq %d", got, seq)
	}
}

// tear flips a byte in the data of the slot holding record seq, as a crash in the
// middle of that slot's write would leave it.
func tear(t *testing.T, path string, seq uint64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	size := int(binary.LittleEndian.Uint32(b[8:12]))
	for i := range 2 {
		off := recordHeader + i*size
		if binary.LittleEndian.Uint64(b[off:off+8]) == seq {
			b[off+slotHeader] ^= 0xff
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no slot holds record %d", seq)
}

// A torn newest slot gives the record before it, also across a restart of
// the writer: a writer that continues from ReadRecord's sequence must never
// write into the slot holding the newest intact record.
func TestRecordTornSlotGivesThePreviousRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	w := NewRecordWriter(path, 0o600, 0)
	for _, data := range []string{"one", "two", "three"} {
		if err := w.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	_ = w.Close()
	_, seq := mustRead(t, path)
	w = NewRecordWriter(path, 0o600, seq) // a restart: the file is made anew
	defer w.Close()
	for _, data := range []string{"four", "five"} {
		if err := w.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	tear(t, path, 5)
	if got, seq := mustRead(t, path); got != "four" || seq != 4 {
		t.Fatalf("newest slot torn: read %q at seq %d, want \"four\" at 4", got, seq)
	}
	tear(t, path, 4)
	if _, _, err := ReadRecord(path); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("both slots torn: %v, want ErrCorrupt naming the file", err)
	}
}

// A power loss during a write can garble every disk sector the write
// touched, not only the bytes it changed. Whichever slot is written, the
// header and the other slot must come through: the record before is read.
func TestRecordGarbledSectorsKeepTheHeaderAndTheOtherSlot(t *testing.T) {
	for _, last := range []string{"odd", "even"} {
		path := filepath.Join(t.TempDir(), "state")
		w := NewRecordWriter(path, 0o600, 0)
		records := []string{"one", "two", "three"}
		if last == "even" {
			records = append(records, "four")
		}
		for _, data := range records {
			if err := w.Write([]byte(data)); err != nil {
				t.Fatal(err)
			}
		}
		_ = w.Close()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		seq := uint64(len(records))
		size := int(binary.LittleEndian.Uint32(b[8:12]))
		off := recordHeader + int(seq%2)*size
		end := off + slotHeader + len(records[seq-1])
		for i := off &^ 511; i < (end+511)&^511 && i < len(b); i++ {
			b[i] = 0xa5
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if got, gotSeq := mustRead(t, path); got != records[seq-2] || gotSeq != seq-1 {
			t.Fatalf("sectors of record %d garbled: read %.40q (%d bytes) at seq %d, want %q", seq, got, len(got), gotSeq, records[seq-2])
		}
	}
}

func TestRecordCorruptHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	w := NewRecordWriter(path, 0o600, 0)
	defer w.Close()
	if err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	b[9] ^= 0x01 // the slot size
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadRecord(path); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt header: %v, want ErrCorrupt", err)
	}
}

// The writer runs in a child process (this test binary again), writing
// numbered records and printing each number once Write has returned; it is
// killed with SIGKILL at random points. The file must then hold an intact
// record at least as new as the last one printed. (SIGKILL keeps the page
// cache, so it cannot tear a slot: TestRecordTornSlotGivesThePreviousRecord
// covers a power loss.)
const recordChildEnv = "TRELLIS_FSYNC_RECORD_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(recordChildEnv); path != "" {
		if err := recordChild(path); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func recordChild(path string) error {
	data, seq, err := ReadRecord(path)
	next := 0
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if next, err = strconv.Atoi(strings.TrimSpace(string(data[:bytes.IndexByte(data, ' ')]))); err != nil {
			return fmt.Errorf("record %q: %w", data, err)
		}
	}
	w := NewRecordWriter(path, 0o600, seq)
	pad := strings.Repeat("p", 300)
	for i := next + 1; ; i++ {
		// Records of changing length, some past the slot size.
		n := i % 37 * 113
		if i%50 == 0 {
			n = 5000 + i
		}
		if err := w.Write(fmt.Appendf(nil, "%d %s", i, strings.Repeat(pad, n/300+1)[:n])); err != nil {
			return err
		}
		fmt.Println(i)
	}
}

func TestRecordSurvivesSIGKILL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	kills, checked := 0, 0
	for round := range 12 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), recordChildEnv+"="+path)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		last := -1
		sc := bufio.NewScanner(out)
		deadline := time.Now().Add(time.Duration(20+round*7) * time.Millisecond)
		for sc.Scan() {
			last, _ = strconv.Atoi(sc.Text())
			if time.Now().After(deadline) && last > 0 {
				break
			}
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		kills++
		if last <= 0 {
			t.Fatalf("round %d: the child wrote nothing", round)
		}
		data, _, err := ReadRecord(path)
		if err != nil {
			t.Fatalf("round %d: after SIGKILL: %v", round, err)
		}
		got, err := strconv.Atoi(string(data[:bytes.IndexByte(data, ' ')]))
		if err != nil || got < last {
			t.Fatalf("round %d: after SIGKILL the file holds record %d (%v); the child had written %d", round, got, err, last)
		}
		checked++
	}
	if kills != 12 || checked != 12 {
		t.Fatalf("%d kills, %d files checked; want 12 of each", kills, checked)
	}
}
