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
	"io"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// fuzzLimit turns a fuzzed number into a bound between 1 byte and 64 KiB.
func fuzzLimit(n uint16) int64 { return int64(n) + 1 }

var (
	fuzzEncoderOnce sync.Once
	fuzzEncoder     *zstd.Encoder
	// fuzzWriters keeps an encoder of each stream format for reuse.
	fuzzWriters = map[int]*sync.Pool{
		CompressionZlib: {New: func() any { return zlib.NewWriter(nil) }},
		CompressionLZ4:  {New: func() any { return lz4.NewWriter(nil) }},
	}
)

// FuzzDecompress feeds any bytes, as any compression type (the three of
// RocketMQ and the undefined ones), under any bound up to 64 KiB, to
// Decompress: it never panics, never returns more than the bound, and
// returns either the bytes, ErrInflateLimit, or an error of decoding, never
// two of them. The same bytes, compressed by the Go encoder of the type,
// round-trip, or are refused with ErrInflateLimit exactly when they are
// longer than the bound. The seeds are the Java client's vectors (events,
// bombs), truncated and corrupted copies of them, and bodies of every type.
func FuzzDecompress(f *testing.F) {
	for ext, typ := range javaTypes {
		for _, name := range []string{"event.json.", "bomb-1mib."} {
			b := javaVector(f, name+ext)
			f.Add(b, uint8(typ), uint16(65535))
			f.Add(b, uint8(typ), uint16(4000))
			f.Add(b[:len(b)/2], uint8(typ), uint16(65535))
			c := append([]byte(nil), b...)
			c[len(c)/3] ^= 0x5a
			f.Add(c, uint8(typ), uint16(65535))
		}
	}
	f.Add(javaVector(f, "event-level22.json.zstd"), uint8(CompressionZstd), uint16(65535))
	f.Add(javaVector(f, "event.json"), uint8(CompressionDefault), uint16(65535))
	f.Add([]byte{}, uint8(5), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, typ uint8, n uint16) {
		limit := fuzzLimit(n)
		compression := int(typ % 8)
		out, err := Decompress(data, compression, limit)
		checkResult(t, out, err, limit)
		if compression > CompressionZlib {
			if !errors.Is(err, ErrUnknownCompression) {
				t.Fatalf("type %d: %v, want ErrUnknownCompression", compression, err)
			}
			return
		}
		z := fuzzCompress(t, compression, data)
		out, err = Decompress(z, compression, limit)
		checkResult(t, out, err, limit)
		switch {
		case int64(len(data)) > limit:
			if !errors.Is(err, ErrInflateLimit) {
				t.Fatalf("%s of %d bytes, bound %d: %d bytes, %v; want ErrInflateLimit",
					CompressionName(compression), len(data), limit, len(out), err)
			}
		case err != nil || !bytes.Equal(out, data):
			t.Fatalf("%s of %d bytes, bound %d: round trip gave %d bytes, %v",
				CompressionName(compression), len(data), limit, len(out), err)
		}
	})
}

// checkResult checks the contract of one Decompress call.
func checkResult(t *testing.T, out []byte, err error, limit int64) {
	t.Helper()
	if int64(len(out)) > limit {
		t.Fatalf("%d bytes returned, past the bound of %d", len(out), limit)
	}
	if err != nil && out != nil {
		t.Fatalf("both %d bytes and an error (%v)", len(out), err)
	}
	if err == nil && out == nil {
		t.Fatalf("neither bytes nor an error")
	}
}

// fuzzCompress compresses data with the Go encoder of the format typ,
// reused across calls: the zstd encoder is shared (EncodeAll is safe for
// concurrent use), the others pooled.
func fuzzCompress(t *testing.T, typ int, data []byte) []byte {
	if typ == CompressionDefault {
		typ = CompressionZlib
	}
	if typ != CompressionZstd {
		w := fuzzWriters[typ].Get().(resetWriter)
		defer fuzzWriters[typ].Put(w)
		var b bytes.Buffer
		w.Reset(&b)
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	fuzzEncoderOnce.Do(func() {
		var err error
		if fuzzEncoder, err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1)); err != nil {
			panic(err)
		}
	})
	return fuzzEncoder.EncodeAll(data, nil)
}

// resetWriter is an encoder that can start a new stream.
type resetWriter interface {
	Reset(io.Writer)
	Write([]byte) (int, error)
	Close() error
}
