// Package shm is the shared-memory half of loom's plugin protocol. The host creates a memory
// file (memfd), seals it against shrinking, and hands it to the plugin at spawn as file
// descriptor 3 (its number is in the environment variable LOOM_SHM_FD). Each step the host
// writes the rows' tokens, text and logits into it and sends only their offsets over gRPC;
// the plugin reads them in place and may rewrite logits or candidate items in place.
//
// The host may grow the file between calls; every StepRequest carries the current size and
// the plugin remaps when it grew. Because the file cannot shrink, neither side can make the
// other's mapping fault.
//
// Plugin authors do not use this package: the sdk does.
package shm

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// EnvFD is the environment variable that names the plugin's descriptor of the region.
const EnvFD = "LOOM_SHM_FD"

// Align is the alignment of every array the host places in the region.
const Align = 8

// Item is one (token id, logit) pair as laid out in the region: 4-byte little-endian id, then
// the float32 logit. It has the memory layout of core.Candidate.
type Item struct {
	ID    int32
	Logit float32
}

// Region is a mapped memory file.
type Region struct {
	mu   sync.Mutex
	f    *os.File
	mem  []byte
	host bool
}

// Create makes a sealed memory file of size bytes and maps it (host side).
func Create(name string, size int) (*Region, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	r := &Region{f: f, host: true}
	if err := r.Grow(size); err != nil {
		f.Close()
		return nil, err
	}
	// The plugin may write and even grow the file but never shrink it, nor change the seals.
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL); err != nil {
		r.Close()
		return nil, fmt.Errorf("sealing the memory file: %w", err)
	}
	return r, nil
}

// Open wraps a descriptor received from the host (plugin side). Nothing is mapped until Ensure.
func Open(fd uintptr) *Region {
	return &Region{f: os.NewFile(fd, "loom-shm")}
}

// OpenFromEnv opens the region the host handed over, or returns nil when there is none.
func OpenFromEnv() *Region {
	v := os.Getenv(EnvFD)
	if v == "" {
		return nil
	}
	var fd int
	if _, err := fmt.Sscan(v, &fd); err != nil || fd < 3 {
		return nil
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return nil
	}
	return Open(uintptr(fd))
}

// File is the memory file, for exec.Cmd.ExtraFiles.
func (r *Region) File() *os.File { return r.f }

// Size is the mapped size.
func (r *Region) Size() int { return len(r.mem) }

// Grow makes the file (host) at least size bytes long and maps all of it. Slices obtained
// before are invalid afterwards.
func (r *Region) Grow(size int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if size <= len(r.mem) {
		return nil
	}
	if r.host {
		if err := r.f.Truncate(int64(size)); err != nil {
			return fmt.Errorf("growing the memory file to %d bytes: %w", size, err)
		}
	}
	return r.remap(size)
}

// Ensure maps at least size bytes of the file (plugin side); the host has made it that long.
func (r *Region) Ensure(size int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if size <= len(r.mem) {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(r.f.Fd()), &st); err != nil {
		return err
	}
	if st.Size < int64(size) {
		return fmt.Errorf("memory file is %d bytes, the host says %d", st.Size, size)
	}
	return r.remap(size)
}

func (r *Region) remap(size int) error {
	if r.mem != nil {
		if err := unix.Munmap(r.mem); err != nil {
			return err
		}
		r.mem = nil
	}
	mem, err := unix.Mmap(int(r.f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mapping the memory file: %w", err)
	}
	r.mem = mem
	return nil
}

// Close unmaps the region and closes the file.
func (r *Region) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var err error
	if r.mem != nil {
		err = unix.Munmap(r.mem)
		r.mem = nil
	}
	return errors.Join(err, r.f.Close())
}

// ErrBounds is returned for an array that does not lie inside the region.
var ErrBounds = errors.New("array outside the shared memory region or misaligned")

func (r *Region) span(off uint64, n, elem int) ([]byte, error) {
	end := off + uint64(n)*uint64(elem)
	if n < 0 || off%Align != 0 || end < off || end > uint64(len(r.mem)) {
		return nil, fmt.Errorf("%w: offset %d, %d×%d bytes, region %d bytes", ErrBounds, off, n, elem, len(r.mem))
	}
	return r.mem[off:end:end], nil
}

// Bytes returns n bytes at off.
func (r *Region) Bytes(off uint64, n int) ([]byte, error) { return r.span(off, n, 1) }

// Float32s returns n float32s at off.
func (r *Region) Float32s(off uint64, n int) ([]float32, error) {
	b, err := r.span(off, n, 4)
	if err != nil || n == 0 {
		return nil, err
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n), nil
}

// Int32s returns n int32s at off.
func (r *Region) Int32s(off uint64, n int) ([]int32, error) {
	b, err := r.span(off, n, 4)
	if err != nil || n == 0 {
		return nil, err
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), n), nil
}

// Items returns n items at off.
func (r *Region) Items(off uint64, n int) ([]Item, error) {
	b, err := r.span(off, n, 8)
	if err != nil || n == 0 {
		return nil, err
	}
	return unsafe.Slice((*Item)(unsafe.Pointer(&b[0])), n), nil
}

// AlignUp rounds n up to a multiple of Align.
func AlignUp(n uint64) uint64 { return (n + Align - 1) &^ (Align - 1) }

// The doorbell: a faster way than a gRPC stream to hand one step to the plugin and get its
// answer. The host passes the plugin two pipes (EnvDoorbell = "<read fd>,<write fd>", the
// plugin's ends), and reserves the start of the region as a mailbox:
//
//	bytes 0–8    length of the message in the mailbox (little-endian uint64)
//	bytes 8–16   capacity of the mailbox
//	bytes 64–    the mailbox: a StepRequest from the host, then the plugin's StepReply
//
//	bytes 16–24  features of the plugin's doorbell (FeatureWake), written by the plugin
//	             before it answers Describe
//
// The host writes the request, then one byte (StepByte) to the plugin's read pipe; the plugin
// decodes the request, writes its reply over it, then one byte to its write pipe. A closed
// pipe means the other side is gone.
//
// With FeatureWake the host may ring WakeByte first, as soon as it knows a step is coming and
// before it writes the step's data: the plugin's thread wakes up while the host copies the
// logits, then polls for the StepByte that follows.
const (
	EnvDoorbell   = "LOOM_DOORBELL_FDS"
	MailboxOffset = 64

	StepByte byte = 1
	WakeByte byte = 2

	// FeatureWake says the plugin takes WakeByte.
	FeatureWake uint64 = 1
)

// Features returns the plugin's doorbell features from the header.
func (r *Region) Features() uint64 {
	if len(r.mem) < MailboxOffset {
		return 0
	}
	return le64(r.mem[16:24])
}

// SetFeatures writes the plugin's doorbell features into the header.
func (r *Region) SetFeatures(f uint64) { put64(r.mem[16:24], f) }

// MailboxLen returns the length and capacity fields of the header.
func (r *Region) MailboxLen() (length, capacity uint64) {
	if len(r.mem) < MailboxOffset {
		return 0, 0
	}
	return le64(r.mem[0:8]), le64(r.mem[8:16])
}

// SetMailbox writes the header's length and capacity fields.
func (r *Region) SetMailbox(length, capacity uint64) {
	put64(r.mem[0:8], length)
	put64(r.mem[8:16], capacity)
}

// SetMailboxLen writes the header's length field.
func (r *Region) SetMailboxLen(length uint64) { put64(r.mem[0:8], length) }

// Mailbox returns the mailbox's first n bytes.
func (r *Region) Mailbox(n int) ([]byte, error) { return r.Bytes(MailboxOffset, n) }

func le64(b []byte) uint64 {
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

func put64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

// Ring writes StepByte to fd, retrying on EINTR.
func Ring(fd int) error { return ring(fd, StepByte) }

// RingWake writes WakeByte to fd, retrying on EINTR.
func RingWake(fd int) error { return ring(fd, WakeByte) }

func ring(fd int, b byte) error {
	one := []byte{b}
	for {
		_, err := unix.Write(fd, one)
		if err != unix.EINTR {
			return err
		}
	}
}

// ErrHungUp is returned by Wait when the other side closed its end.
var ErrHungUp = errors.New("the other side closed the doorbell")

// Receive waits for one byte on fd, which must be in non-blocking mode (O_NONBLOCK), and
// returns it. It polls fd for up to spin before it sleeps in poll(2): a side that expects the
// byte within microseconds saves the wake-up of a sleeping thread (tens of microseconds on
// virtual machines) for the price of a core spent spinning that long.
func Receive(fd int, spin time.Duration) (byte, error) {
	var b [1]byte
	start := time.Now()
	for {
		n, err := unix.Read(fd, b[:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if spin > 0 && time.Since(start) < spin {
				continue
			}
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
				return 0, err
			}
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, ErrHungUp
		}
		return b[0], nil
	}
}

// Wait blocks until one byte arrives on fd.
func Wait(fd int) error {
	var b [1]byte
	for {
		n, err := unix.Read(fd, b[:])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return err
		case n == 0:
			return ErrHungUp
		}
		return nil
	}
}
