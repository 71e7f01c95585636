// Package compresstest compresses test bodies as the official RocketMQ
// Java client does, for tests of the decoding of compressed messages.
package compresstest

import (
	"bytes"
	"compress/zlib"
	"io"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Zstd compresses b as the Java client's ZstdCompressor (zstd-jni's
// ZstdOutputStream) does: one frame, no checksum, a 2 MiB window.
func Zstd(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := zstd.NewWriter(&out, zstd.WithEncoderCRC(false), zstd.WithWindowSize(2<<20), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	return magic(t, finish(t, &out, w, b), []byte{0x28, 0xb5, 0x2f, 0xfd})
}

// LZ4 compresses b as the Java client's Lz4Compressor (lz4-java's
// LZ4FrameOutputStream) does: one frame of 4 MiB blocks, no checksums.
func LZ4(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w := lz4.NewWriter(&out)
	if err := w.Apply(lz4.BlockSizeOption(lz4.Block4Mb), lz4.ChecksumOption(false)); err != nil {
		t.Fatal(err)
	}
	return magic(t, finish(t, &out, w, b), []byte{0x04, 0x22, 0x4d, 0x18})
}

// Zlib compresses b as the Java client's default compressor
// (java.util.zip.Deflater at level 5) does.
func Zlib(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := zlib.NewWriterLevel(&out, 5)
	if err != nil {
		t.Fatal(err)
	}
	return finish(t, &out, w, b)
}

func finish(t testing.TB, out *bytes.Buffer, w io.WriteCloser, b []byte) []byte {
	t.Helper()
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// magic fails the test unless frame starts with the format's magic number.
func magic(t testing.TB, frame, want []byte) []byte {
	t.Helper()
	if !bytes.HasPrefix(frame, want) {
		t.Fatalf("frame starts % x, want % x", frame[:min(len(frame), 4)], want)
	}
	return frame
}
