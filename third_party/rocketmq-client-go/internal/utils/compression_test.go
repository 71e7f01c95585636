/*
Licensed to the Apache Software Foundation (ASF) under one or more
contributor license agreements.  See the NOTICE file distributed with
this work for additional information regarding copyright ownership.
The ASF licenses this file to You under the Apache License, Version 2.0
(the "License"); you may not use this file except in compliance with
the License.  You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// orderflow patch: this whole file.

package utils

import (
	"bytes"
	"compress/zlib"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

const testLimit = 64 << 10

// javaVector reads a file of testdata/java, written by the RocketMQ Java
// client's compressors (JavaVectors.java there).
func javaVector(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "java", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// javaTypes maps the extension of a Java vector to its compression type.
var javaTypes = map[string]int{"lz4": CompressionLZ4, "zstd": CompressionZstd, "zlib": CompressionZlib}

// The bits of the system flag, as rocketmq-common 5.3.3's MessageSysFlag
// defines them: COMPRESSION_LZ4_TYPE 256, COMPRESSION_ZSTD_TYPE 512,
// COMPRESSION_ZLIB_TYPE 768, COMPRESSION_TYPE_COMPARATOR 1792.
func TestCompressionTypeOfTheJavaFlags(t *testing.T) {
	for flag, want := range map[int32]int{1: CompressionDefault, 1 | 256: CompressionLZ4, 1 | 512: CompressionZstd,
		1 | 768: CompressionZlib, 1 | 1792: 7, 1 | 16 | 32 | 128 | 512: CompressionZstd, 1 | 2048 | 256: CompressionLZ4} {
		if got := CompressionTypeOf(flag); got != want {
			t.Errorf("CompressionTypeOf(%d) = %d, want %d", flag, got, want)
		}
	}
	if CompressionTypeMask != 1792 {
		t.Errorf("CompressionTypeMask = %d, want 1792", CompressionTypeMask)
	}
	for typ, want := range map[int]string{0: "zlib", 1: "lz4", 2: "zstd", 3: "zlib", 4: "type 4", 7: "type 7"} {
		if got := CompressionName(typ); got != want {
			t.Errorf("CompressionName(%d) = %q, want %q", typ, got, want)
		}
	}
}

// What the Java client's Lz4Compressor, ZstdCompressor and ZlibCompressor
// wrote decodes to the body they were given, at the default and the
// highest levels (a zstd frame of level 22 declares a 128 MiB window).
func TestDecompressJavaVectors(t *testing.T) {
	want := javaVector(t, "event.json")
	for _, name := range []string{"event.json.lz4", "event.json.zstd", "event.json.zlib",
		"event-level22.json.zstd", "event-level9.json.zlib"} {
		typ := javaTypes[filepath.Ext(name)[1:]]
		for _, limit := range []int64{testLimit, int64(len(want)), 0} {
			got, err := Decompress(javaVector(t, name), typ, limit)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s, limit %d: %d bytes, %v; want the %d bytes of event.json", name, limit, len(got), err, len(want))
			}
		}
		if _, err := Decompress(javaVector(t, name), typ, int64(len(want)-1)); !errors.Is(err, ErrInflateLimit) {
			t.Errorf("%s, limit one byte short: %v, want ErrInflateLimit", name, err)
		}
	}
	// A body compressed by an older client (type 0) is zlib.
	if got, err := Decompress(javaVector(t, "event.json.zlib"), CompressionDefault, testLimit); err != nil || !bytes.Equal(got, want) {
		t.Errorf("type 0: %d bytes, %v", len(got), err)
	}
}

// 1 MiB of zeros, compressed by the Java client, is refused under a 64 KiB
// limit, and inflates to exactly 1 MiB when the limit allows it.
func TestDecompressJavaBombs(t *testing.T) {
	for ext, typ := range javaTypes {
		bomb := javaVector(t, "bomb-1mib."+ext)
		if got, err := Decompress(bomb, typ, testLimit); !errors.Is(err, ErrInflateLimit) || got != nil {
			t.Errorf("%s bomb, limit 64 KiB: %d bytes, %v; want ErrInflateLimit", ext, len(got), err)
		}
		if _, err := Decompress(bomb, typ, 1<<20-1); !errors.Is(err, ErrInflateLimit) {
			t.Errorf("%s bomb, limit 1 MiB - 1: %v; want ErrInflateLimit", ext, err)
		}
		for _, limit := range []int64{1 << 20, 0} {
			got, err := Decompress(bomb, typ, limit)
			if err != nil || !bytes.Equal(got, make([]byte, 1<<20)) {
				t.Errorf("%s bomb, limit %d: %d bytes, %v; want 1 MiB of zeros", ext, limit, len(got), err)
			}
		}
	}
}

// A bomb of 64 MiB is refused without inflating it: decoding allocates a
// few MiB at most (LZ4 holds one block of up to 4 MiB), not the 64 MiB.
func TestDecompressLargeBombsStayBounded(t *testing.T) {
	zeros := make([]byte, 1<<20)
	for _, typ := range []int{CompressionZlib, CompressionLZ4, CompressionZstd} {
		var b bytes.Buffer
		w := compressor(t, typ, &b)
		for range 64 {
			if _, err := w.Write(zeros); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Decompress(b.Bytes(), typ, testLimit)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrInflateLimit) {
			t.Errorf("%s bomb of %d bytes: %v, want ErrInflateLimit", CompressionName(typ), b.Len(), err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
			t.Errorf("%s bomb: decoding allocated %d MiB", CompressionName(typ), alloc>>20)
		}
	}
}

// Every prefix of a valid stream is undecodable, never taken for a whole
// body and never reported as too large.
func TestDecompressTruncated(t *testing.T) {
	for _, name := range []string{"event.json.lz4", "event.json.zstd", "event.json.zlib"} {
		typ := javaTypes[filepath.Ext(name)[1:]]
		full := javaVector(t, name)
		for n := 0; n < len(full); n++ {
			got, err := Decompress(full[:n], typ, testLimit)
			if err == nil || errors.Is(err, ErrInflateLimit) || got != nil {
				t.Fatalf("%s cut to %d of %d bytes: %d bytes, %v; want an error of decoding", name, n, len(full), len(got), err)
			}
		}
	}
}

// Corrupt streams are undecodable: a wrong magic number or header, a
// reserved block type, a checksum that does not match, bytes after an
// LZ4 or zstd frame.
func TestDecompressCorrupt(t *testing.T) {
	flip := func(b []byte, i int, x byte) []byte {
		c := append([]byte(nil), b...)
		c[i] ^= x
		return c
	}
	event := func(ext string) []byte { return javaVector(t, "event.json."+ext) }
	cases := []struct {
		name string
		typ  int
		data []byte
	}{
		{"lz4 magic", CompressionLZ4, flip(event("lz4"), 0, 0xff)},
		{"lz4 version bits", CompressionLZ4, flip(event("lz4"), 4, 0xc0)},
		{"lz4 header checksum", CompressionLZ4, flip(event("lz4"), 6, 0x01)},
		{"lz4 trailing bytes", CompressionLZ4, append(event("lz4"), 1, 2, 3)},
		{"zstd magic", CompressionZstd, flip(event("zstd"), 0, 0xff)},
		{"zstd reserved block type", CompressionZstd, flip(event("zstd"), 6, 0x06)},
		{"zstd trailing bytes", CompressionZstd, append(event("zstd"), 1, 2, 3)},
		{"zlib header", CompressionZlib, flip(event("zlib"), 0, 0x01)},
		{"zlib adler-32", CompressionZlib, flip(event("zlib"), len(event("zlib"))-1, 0x01)},
		{"zstd as lz4", CompressionLZ4, event("zstd")},
		{"lz4 as zstd", CompressionZstd, event("lz4")},
		{"lz4 as zlib", CompressionZlib, event("lz4")},
		{"plain JSON as zstd", CompressionZstd, javaVector(t, "event.json")},
		{"plain JSON as lz4", CompressionLZ4, javaVector(t, "event.json")},
		{"plain JSON as zlib", CompressionZlib, javaVector(t, "event.json")},
	}
	for typ := range javaTypes {
		cases = append(cases, struct {
			name string
			typ  int
			data []byte
		}{"empty " + typ, javaTypes[typ], []byte{}})
	}
	for _, c := range cases {
		got, err := Decompress(c.data, c.typ, testLimit)
		if err == nil || errors.Is(err, ErrInflateLimit) || got != nil {
			t.Errorf("%s: %d bytes, %v; want an error of decoding", c.name, len(got), err)
		}
	}
}

// Types 4 to 7 are not defined: refused with ErrUnknownCompression, not
// guessed.
func TestDecompressUnknownType(t *testing.T) {
	for typ := 4; typ <= 7; typ++ {
		if _, err := Decompress(javaVector(t, "event.json.zlib"), typ, testLimit); !errors.Is(err, ErrUnknownCompression) {
			t.Errorf("type %d: %v, want ErrUnknownCompression", typ, err)
		}
	}
}

// UnCompress keeps its upstream behaviour: zlib without a bound, and the
// data unchanged when it is not zlib.
func TestUnCompress(t *testing.T) {
	want := javaVector(t, "event.json")
	if got := UnCompress(javaVector(t, "event.json.zlib")); !bytes.Equal(got, want) {
		t.Errorf("UnCompress: %d bytes", len(got))
	}
	if got := UnCompress(want); !bytes.Equal(got, want) {
		t.Errorf("UnCompress of plain data changed it")
	}
}

// Streams written by the Go encoders of each format round-trip.
func TestDecompressRoundTrip(t *testing.T) {
	bodies := [][]byte{[]byte("{}"), bytes.Repeat([]byte("0123456789abcdef"), 4096), javaVector(t, "event.json")}
	for typ := range map[int]bool{CompressionLZ4: true, CompressionZstd: true, CompressionZlib: true} {
		for _, body := range bodies {
			z := compressed(t, typ, body)
			got, err := Decompress(z, typ, testLimit)
			if err != nil || !bytes.Equal(got, body) {
				t.Errorf("%s, %d bytes: got %d bytes, %v", CompressionName(typ), len(body), len(got), err)
			}
		}
	}
}

type writeCloser interface {
	Write([]byte) (int, error)
	Close() error
}

// compressor is a Go encoder of the format typ into w.
func compressor(t testing.TB, typ int, w *bytes.Buffer) writeCloser {
	t.Helper()
	switch typ {
	case CompressionLZ4:
		return lz4.NewWriter(w)
	case CompressionZstd:
		z, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		return z
	}
	return zlib.NewWriter(w)
}

// compressed is body compressed by the Go encoder of the format typ.
func compressed(t testing.TB, typ int, body []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := compressor(t, typ, &b)
	if _, err := w.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
