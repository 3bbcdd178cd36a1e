package org.diffvk.demo;

import android.app.Activity;
import android.widget.Button;
import android.widget.LinearLayout;

/** The views the activities build alike. */
final class Views {
    private Views() {}

    /** A vertical column padded by 12 dp on every side. */
    static LinearLayout column(Activity a) {
        LinearLayout col = new LinearLayout(a);
        col.setOrientation(LinearLayout.VERTICAL);
        int pad = (int) (12 * a.getResources().getDisplayMetrics().density);
        col.setPadding(pad, pad, pad, pad);
        return col;
    }

    /** A button labelled `label`, added to the end of `row`. */
    static Button button(Activity a, LinearLayout row, String label) {
        Button b = new Button(a);
        b.setText(label);
        row.addView(b);
        return b;
    }
}
