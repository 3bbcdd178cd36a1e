package org.diffvk.demo;

import android.content.res.AssetFileDescriptor;
import android.content.res.AssetManager;

import java.io.IOException;

import diffvk.Model;

/**
 * Loads a checkpoint straight from the APK's assets, without copying it: assets/<dir>/config.json and
 * assets/<dir>/model.safetensors must be stored uncompressed (app/build.gradle: noCompress), so that
 * AssetManager.openFd gives (descriptor, offset, length) into the APK, which diffvk reads with pread
 * (Model.loadFromFds -> diffvk_model_load_fd).
 */
final class AssetModels {
    private AssetModels() {}

    static Model load(AssetManager assets, String dir, Model.Options options) throws IOException {
        try (AssetFileDescriptor cfg = assets.openFd(dir + "/config.json");
             AssetFileDescriptor weights = assets.openFd(dir + "/model.safetensors")) {
            return Model.loadFromFds(cfg.getParcelFileDescriptor().getFd(), cfg.getStartOffset(), cfg.getLength(),
                                     weights.getParcelFileDescriptor().getFd(), weights.getStartOffset(),
                                     weights.getLength(), options);
        }
    }
}
