// Command apidoc writes the API reference (docs/api.md) from the API's
// schema: the image `buf build` makes of proto/, with its comments.
// scripts/gen.sh runs it; CI checks the page matches the schema.
//
//	buf build proto -o image.binpb && go run ./internal/cmd/apidoc image.binpb > docs/api.md
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: apidoc IMAGE.binpb > docs/api.md")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "apidoc:", err)
		os.Exit(1)
	}
}

func run(path string, w io.Writer) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		return err
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		return err
	}
	fmt.Fprint(w, "# API reference: Sluice API v1\n\n")
	fmt.Fprint(w, "Generated from [proto/sluice/v1/sluice.proto](../proto/sluice/v1/sluice.proto) by `scripts/gen.sh`; do not edit. How to call it: [service.md](service.md).\n")
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if !strings.HasPrefix(string(fd.Package()), "sluice.") {
			return true
		}
		writeFile(w, fd)
		return true
	})
	return nil
}

// comment is the leading comment of d, as paragraphs of text.
func comment(d protoreflect.Descriptor) string {
	loc := d.ParentFile().SourceLocations().ByDescriptor(d)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(loc.LeadingComments), "\n") {
		lines = append(lines, strings.TrimSpace(l))
	}
	return strings.Join(lines, " ")
}

func writeFile(w io.Writer, fd protoreflect.FileDescriptor) {
	for i := range fd.Services().Len() {
		sd := fd.Services().Get(i)
		fmt.Fprintf(w, "\n## Service `%s`\n\n%s\n\n| method | request | response | what it does |\n|---|---|---|---|\n", sd.FullName(), comment(sd))
		for j := range sd.Methods().Len() {
			md := sd.Methods().Get(j)
			out := fmt.Sprintf("[`%s`](#%s)", md.Output().Name(), anchor(md.Output()))
			if md.IsStreamingServer() {
				out = "stream " + out
			}
			fmt.Fprintf(w, "| `%s` | [`%s`](#%s) | %s | %s |\n", md.Name(), md.Input().Name(), anchor(md.Input()), out, comment(md))
		}
	}
	fmt.Fprint(w, "\n## Messages\n")
	for i := range fd.Messages().Len() {
		writeMessage(w, fd.Messages().Get(i))
	}
}

func anchor(md protoreflect.MessageDescriptor) string {
	return strings.ToLower(string(md.Name()))
}

func writeMessage(w io.Writer, md protoreflect.MessageDescriptor) {
	fmt.Fprintf(w, "\n### %s\n\n", md.Name())
	if c := comment(md); c != "" {
		fmt.Fprintf(w, "%s\n\n", c)
	}
	if md.Fields().Len() == 0 {
		fmt.Fprint(w, "No fields.\n")
		return
	}
	fmt.Fprint(w, "| field | JSON | type | meaning |\n|---|---|---|---|\n")
	for i := range md.Fields().Len() {
		f := md.Fields().Get(i)
		fmt.Fprintf(w, "| `%s` | `%s` | %s | %s |\n", f.Name(), f.JSONName(), typeOf(f), strings.ReplaceAll(comment(f), "|", "\\|"))
	}
}

func typeOf(f protoreflect.FieldDescriptor) string {
	var t string
	switch {
	case f.IsMap():
		t = fmt.Sprintf("map<%s, %s>", kind(f.MapKey()), kind(f.MapValue()))
	default:
		t = kind(f)
	}
	if f.IsList() {
		t = "repeated " + t
	}
	if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
		t += " (one of `" + string(o.Name()) + "`)"
	}
	return t
}

func kind(f protoreflect.FieldDescriptor) string {
	switch f.Kind() {
	case protoreflect.MessageKind:
		m := f.Message()
		if strings.HasPrefix(string(m.FullName()), "google.protobuf.") {
			return "`" + string(m.FullName()) + "`"
		}
		return fmt.Sprintf("[`%s`](#%s)", m.Name(), anchor(m))
	case protoreflect.Int64Kind, protoreflect.Uint64Kind:
		return "`" + f.Kind().String() + "` (a string in JSON)"
	}
	return "`" + f.Kind().String() + "`"
}
