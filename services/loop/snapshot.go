package loop

import (
	"reflect"
	"strings"
	"unicode/utf8"
)

// snapshot returns a copy of st that shares no memory with it, for the next
// transition to decide on without decoding the stored record again (that
// JSON decode was ~3 % of a step's CPU). It returns nil when the copy could
// differ from the record decoded: a string JSON does not keep as it is
// (invalid UTF-8, which the encoding replaces), or a kind of field it does
// not copy; that session's next transition decodes the record, as another
// process would.
func snapshot(st *State) *State {
	if st == nil {
		return nil
	}
	out := reflect.New(reflect.TypeFor[State]())
	if !deepCopy(out.Elem(), reflect.ValueOf(st).Elem()) {
		return nil
	}
	return out.Interface().(*State)
}

// deepCopy copies src into dst (settable, of src's type), allocating every
// pointer and slice anew; it is false for invalid UTF-8 or an unexpected kind.
func deepCopy(dst, src reflect.Value) bool {
	switch src.Kind() {
	case reflect.String:
		if !utf8.ValidString(src.String()) {
			return false
		}
		dst.SetString(src.String())
	case reflect.Bool, reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint64, reflect.Float64:
		dst.Set(src)
	case reflect.Struct:
		for i := range src.NumField() {
			f := src.Type().Field(i)
			if !f.IsExported() {
				return false // JSON would not keep it
			}
			if f.Type.Kind() == reflect.Slice && src.Field(i).Len() == 0 && strings.Contains(f.Tag.Get("json"), ",omitempty") {
				continue // left out of the record, so nil when decoded
			}
			if !deepCopy(dst.Field(i), src.Field(i)) {
				return false
			}
		}
	case reflect.Pointer:
		if src.IsNil() {
			return true
		}
		p := reflect.New(src.Type().Elem())
		if !deepCopy(p.Elem(), src.Elem()) {
			return false
		}
		dst.Set(p)
	case reflect.Slice:
		if src.IsNil() {
			return true
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			if !deepCopy(s.Index(i), src.Index(i)) {
				return false
			}
		}
		dst.Set(s)
	default:
		return false
	}
	return true
}
