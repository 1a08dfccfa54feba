package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Chart writes a small text chart of ys against xs (minutes): height rows
// of width columns, each column the mean of the points that fall in it,
// '*' where the value is, '|' along the bottom edge under each mark (an
// event: a deploy, a rollback), with the y range on the left and the x
// range below. unit formats the y labels ("bytes" or "").
func Chart(w io.Writer, title string, xs, ys, marks []float64, width, height int, unit string) {
	fmt.Fprintln(w, title)
	if len(xs) == 0 || width < 2 || height < 2 {
		fmt.Fprintln(w, "  (no data)")
		return
	}
	x0, x1 := minMax(xs)
	y0, y1 := minMax(ys)
	if x1 == x0 {
		x1 = x0 + 1
	}
	if y1 == y0 {
		y1 = y0 + 1
	}
	col := func(x float64) int { return min(width-1, max(0, int((x-x0)/(x1-x0)*float64(width-1)+0.5))) }
	sums, counts := make([]float64, width), make([]int, width)
	for i, x := range xs {
		c := col(x)
		sums[c] += ys[i]
		counts[c]++
	}
	grid := make([][]byte, height)
	for r := range grid {
		grid[r] = []byte(strings.Repeat(" ", width))
	}
	for c := range sums {
		if counts[c] == 0 {
			continue
		}
		v := sums[c] / float64(counts[c])
		r := int((y1-v)/(y1-y0)*float64(height-1) + 0.5)
		grid[min(height-1, max(0, r))][c] = '*'
	}
	label := func(v float64) string { return amount(v, unit) }
	lw := max(len(label(y0)), len(label(y1)))
	for r, row := range grid {
		l := ""
		switch r {
		case 0:
			l = label(y1)
		case height - 1:
			l = label(y0)
		}
		fmt.Fprintf(w, "%*s |%s\n", lw, l, row)
	}
	axis := []byte(strings.Repeat("-", width))
	for _, m := range marks {
		if m >= x0 && m <= x1 {
			axis[col(m)] = '|'
		}
	}
	fmt.Fprintf(w, "%*s +%s\n", lw, "", axis)
	left, right := fmt.Sprintf("%.1f min", x0), fmt.Sprintf("%.1f min", x1)
	fmt.Fprintf(w, "%*s  %s%*s\n", lw, "", left, max(1, width-len(left)), right)
}

func minMax(v []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, x := range v {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}
