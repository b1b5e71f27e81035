//! Uploads (multipart, kept and inspectable), file ids, getFile and downloads both ways.
#![allow(clippy::unwrap_used)]

mod common;

use base64::Engine;
use common::Harness;
use reqwest::multipart::{Form, Part};
use serde_json::json;
use tg_fake::control::{MediaItem, SendMedia, SendMediaGroup};
use tg_fake::world::MediaKind;

fn png(w: u32, h: u32) -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    b.extend_from_slice(&w.to_be_bytes());
    b.extend_from_slice(&h.to_be_bytes());
    b.extend_from_slice(&[8, 2, 0, 0, 0, 0, 0, 0, 0]);
    b
}

#[tokio::test]
async fn bot_uploads_each_media_kind_and_the_bytes_are_kept() {
    let h = Harness::start().await;
    let chat = h.chat().to_string();
    let cases = [
        (
            "sendDocument",
            "document",
            "report.pdf",
            b"%PDF-1.4 fake".to_vec(),
        ),
        ("sendPhoto", "photo", "shot.png", png(640, 480)),
        (
            "sendVoice",
            "voice",
            "note.ogg",
            b"OggS fake voice".to_vec(),
        ),
        ("sendAudio", "audio", "song.mp3", b"ID3 fake audio".to_vec()),
    ];
    for (method, field, name, bytes) in cases {
        let form = Form::new()
            .text("chat_id", chat.clone())
            .text("caption", "<b>look</b>")
            .text("parse_mode", "HTML")
            .part(field, Part::bytes(bytes.clone()).file_name(name));
        let ans = h.call_multipart(method, form).await;
        let msg = ans.result();
        assert_eq!(msg["caption"], json!("look"), "{method}");
        assert_eq!(msg["caption_entities"][0]["type"], json!("bold"));
        let file_id = if field == "photo" {
            let sizes = msg["photo"].as_array().unwrap();
            let largest = sizes.last().unwrap();
            assert_eq!(
                (largest["width"].clone(), largest["height"].clone()),
                (json!(640), json!(480))
            );
            largest["file_id"].as_str().unwrap().to_owned()
        } else {
            msg[field]["file_id"].as_str().unwrap().to_owned()
        };
        // The upload is inspectable byte for byte.
        assert_eq!(
            h.fake
                .control()
                .file_bytes(&file_id, None)
                .unwrap()
                .to_vec(),
            bytes,
            "{method}"
        );
        // And downloadable through getFile like any file.
        let f = h.call("getFile", json!({ "file_id": file_id })).await;
        let path = f.result()["file_path"].as_str().unwrap().to_owned();
        assert_eq!(f.result()["file_size"], json!(bytes.len()));
        let url = format!("{}/file/bot{}/{}", h.fake.base_url(), h.token, path);
        let got = h.http.get(url).send().await.unwrap().bytes().await.unwrap();
        assert_eq!(got.to_vec(), bytes);
    }
    let uploads = h.fake.control().uploads(None).unwrap();
    assert_eq!(uploads.len(), 4);
    let doc = uploads
        .iter()
        .find(|u| u.kind == MediaKind::Document)
        .unwrap();
    assert_eq!(doc.file_name.as_deref(), Some("report.pdf"));
    assert_eq!(doc.mime_type.as_deref(), Some("application/pdf"));
    assert!(doc.from_bot);
}

#[tokio::test]
async fn attach_references_file_ids_and_url_and_empty_files() {
    let h = Harness::start().await;
    let chat = h.chat().to_string();
    // attach://name refers to another part.
    let form = Form::new()
        .text("chat_id", chat.clone())
        .text("document", "attach://thefile")
        .part(
            "thefile",
            Part::bytes(b"attached".to_vec()).file_name("a.txt"),
        );
    let first = h.call_multipart("sendDocument", form).await;
    let file_id = first.result()["document"]["file_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Re-sending by file_id needs no upload and yields the same file.
    let again = h
        .call(
            "sendDocument",
            json!({ "chat_id": h.chat(), "document": file_id }),
        )
        .await;
    assert_eq!(again.result()["document"]["file_id"], json!(file_id));
    h.call(
        "sendDocument",
        json!({ "chat_id": h.chat(), "document": "nonexistent" }),
    )
    .await
    .expect_error(400, "Bad Request: wrong file identifier/HTTP URL specified");
    h.call(
        "sendDocument",
        json!({ "chat_id": h.chat(), "document": "https://example.invalid/x.pdf" }),
    )
    .await
    .expect_error(400, "Bad Request: failed to get HTTP URL content");
    let empty = Form::new()
        .text("chat_id", chat)
        .part("document", Part::bytes(Vec::new()).file_name("e.txt"));
    h.call_multipart("sendDocument", empty)
        .await
        .expect_error(400, "Bad Request: file must be non-empty");
    h.call("getFile", json!({ "file_id": "nope" }))
        .await
        .expect_error(400, "Bad Request: invalid file_id");
}

#[tokio::test]
async fn person_sends_photos_documents_voice_and_albums() {
    let h = Harness::start().await;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let photo = h
        .fake
        .control()
        .send_media(SendMedia {
            item: MediaItem {
                kind: MediaKind::Photo,
                data_base64: b64(&png(1280, 720)),
                filename: None,
                mime_type: None,
                caption: Some("what is this?".into()),
            },
            thread_id: None,
            user_id: None,
            reply_to_message_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
    let voice = h
        .fake
        .control()
        .send_media(SendMedia {
            item: MediaItem {
                kind: MediaKind::Voice,
                data_base64: b64(b"OggS voice"),
                filename: None,
                mime_type: None,
                caption: None,
            },
            thread_id: None,
            user_id: None,
            reply_to_message_id: Some(photo.message_id),
            token: None,
            chat_id: None,
        })
        .unwrap();
    let album = h
        .fake
        .control()
        .send_media_group(SendMediaGroup {
            items: (0..3)
                .map(|i| MediaItem {
                    kind: MediaKind::Document,
                    data_base64: b64(format!("file {i}").as_bytes()),
                    filename: Some(format!("f{i}.txt")),
                    mime_type: None,
                    caption: None,
                })
                .collect(),
            thread_id: None,
            user_id: None,
            token: None,
        })
        .unwrap();
    assert_eq!(album.len(), 3);
    let updates = h.call("getUpdates", json!({})).await;
    let list = updates.result().as_array().unwrap();
    assert_eq!(list.len(), 5);
    let p = &list[0]["message"];
    assert_eq!(p["caption"], json!("what is this?"));
    assert_eq!(
        p["photo"].as_array().unwrap().last().unwrap()["width"],
        json!(1280)
    );
    let v = &list[1]["message"];
    assert_eq!(v["voice"]["mime_type"], json!("audio/ogg"));
    assert_eq!(v["reply_to_message"]["message_id"], json!(photo.message_id));
    assert_eq!(voice.message_id, photo.message_id + 1);
    let groups: Vec<_> = list[2..]
        .iter()
        .map(|u| u["message"]["media_group_id"].clone())
        .collect();
    assert!(groups.iter().all(|g| g == &groups[0] && g.is_string()));
    // The bot downloads what the person sent.
    let file_id = list[3]["message"]["document"]["file_id"].as_str().unwrap();
    let f = h.call("getFile", json!({ "file_id": file_id })).await;
    let url = format!(
        "{}/file/bot{}/{}",
        h.fake.base_url(),
        h.token,
        f.result()["file_path"].as_str().unwrap()
    );
    assert_eq!(
        h.http.get(url).send().await.unwrap().text().await.unwrap(),
        "file 1"
    );
    // Invalid base64 is a clear control error.
    let bad = h.fake.control().send_media(SendMedia {
        item: MediaItem {
            kind: MediaKind::Photo,
            data_base64: "***".into(),
            filename: None,
            mime_type: None,
            caption: None,
        },
        thread_id: None,
        user_id: None,
        reply_to_message_id: None,
        token: None,
        chat_id: None,
    });
    assert_eq!(bad.unwrap_err().status, 400);
}

#[tokio::test]
async fn big_files_are_refused_at_telegrams_limits() {
    let h = Harness::start().await;
    let b64 = base64::engine::general_purpose::STANDARD.encode(vec![7u8; 21 * 1024 * 1024]);
    let big = h
        .fake
        .control()
        .send_media(SendMedia {
            item: MediaItem {
                kind: MediaKind::Document,
                data_base64: b64,
                filename: Some("big.bin".into()),
                mime_type: None,
                caption: None,
            },
            thread_id: None,
            user_id: None,
            reply_to_message_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
    let updates = h.call("getUpdates", json!({})).await;
    assert_eq!(
        updates.result()[0]["message"]["message_id"],
        json!(big.message_id)
    );
    let file_id = updates.result()[0]["message"]["document"]["file_id"].clone();
    h.call("getFile", json!({ "file_id": file_id }))
        .await
        .expect_error(400, "Bad Request: file is too big");
    // Uploads over 50 MB: 413 from the front end.
    let form = Form::new().text("chat_id", h.chat().to_string()).part(
        "document",
        Part::bytes(vec![0u8; 51 * 1024 * 1024]).file_name("huge.bin"),
    );
    h.call_multipart("sendDocument", form)
        .await
        .expect_error(413, "Request Entity Too Large");
}
