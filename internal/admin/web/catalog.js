// The catalog in the admin console: the product list, the product form
// (prices typed in dollars, kept in integer cents) and the product image.
"use strict";

// ---- products -----------------------------------------------------------
let productsCursor = null;

async function showProducts() {
  show("products");
  $("products").replaceChildren();
  productsCursor = null;
  await moreProducts();
}

async function moreProducts() {
  try {
    const q = "?limit=100" + (productsCursor ? "&cursor=" + enc(productsCursor) : "");
    const page = await api("GET", "/products" + q);
    showRows("products-table", page.items.map(productRow), true);
    productsCursor = page.next_cursor || null;
    $("products-more").hidden = !productsCursor;
  } catch (err) { fail(err); }
}

// thumb is a product's image at list size, or an empty frame.
function thumb(p, cls = "thumb") {
  if (!p.image_url) return el("span", "", cls + " empty");
  const img = el("img", null, cls);
  img.src = p.image_url;
  img.alt = "Image of " + p.name;
  img.loading = "lazy";
  return img;
}

function productRow(p) {
  const tr = el("tr");
  tr.dataset.sku = p.sku;
  cell(tr, "", "image").append(thumb(p));
  cell(tr, p.sku, "mono");
  cell(tr, p.name);
  cell(tr, p.category);
  cell(tr, money(p.price_cents), "num");
  cell(tr, count(p.available), "num");
  const actions = cell(tr, "", "actions");
  actions.append(link("#/product/" + enc(p.sku), "Edit"), link("#/sale/" + enc(p.sku), "Sale"), link("#/live/" + enc(p.sku), "Live"));
  const del = button("Delete", "danger small", () => deleteProduct(p.sku, del), "Delete " + p.sku);
  actions.append(del);
  return tr;
}

// deleteProduct asks for a second click on the same button, so a stray
// click or Enter never deletes.
async function deleteProduct(sku, b) {
  if (b.dataset.armed !== "1") {
    b.dataset.armed = "1";
    b.textContent = "Really delete?";
    setTimeout(() => { b.dataset.armed = ""; b.textContent = "Delete"; }, 4000);
    return;
  }
  try {
    await api("DELETE", "/admin/products/" + enc(sku));
    b.closest("tr").remove();
    say("Deleted " + sku + ".");
  } catch (err) { fail(err); }
}

// ---- the product form ---------------------------------------------------
let editing = ""; // the SKU being edited, "" for a new product

async function showProduct(sku) {
  show("product");
  editing = sku;
  const form = $("product-form");
  form.reset();
  clearErrors(form);
  $("product-title").textContent = sku ? "Edit " + sku : "New product";
  $("product-save").textContent = sku ? "Save changes" : "Create product";
  $("product-sku").readOnly = !!sku;
  $("image-card").hidden = !sku;
  $("image-file").value = ""; // a file chosen while the product loads stays chosen
  if (!sku) return $("product-sku").focus();
  try {
    const p = await api("GET", "/products/" + enc(sku));
    $("product-sku").value = p.sku;
    $("product-name").value = p.name;
    $("product-description").value = p.description || "";
    $("product-category").value = p.category;
    $("product-price").value = centsText(p.price_cents);
    showImage(p);
    $("product-name").focus();
  } catch (err) { fail(err); }
}

async function saveProduct(ev) {
  ev.preventDefault();
  const form = $("product-form");
  clearErrors(form);
  const cents = parseCents($("product-price").value);
  if (cents === null) return fieldError(form, "price_cents", "Type a price in dollars, such as 12.50.");
  const body = {
    name: $("product-name").value, description: $("product-description").value,
    category: $("product-category").value.trim(), price_cents: cents,
  };
  try {
    if (editing) {
      await api("PUT", "/admin/products/" + enc(editing), body);
      say("Saved " + editing + ".");
    } else {
      body.sku = $("product-sku").value.trim();
      const p = await api("POST", "/admin/products", body);
      say("Created " + p.sku + ". Add its image from Edit, and open a sale round for it.");
    }
    location.hash = "#/products";
  } catch (err) { showErrors(form, err); }
}

// ---- the product image --------------------------------------------------
const imageTypes = ["image/png", "image/jpeg", "image/webp"];
const maxImageBytes = 2 << 20;

function showImage(p) {
  const has = !!p.image_url;
  $("image-preview").hidden = !has;
  if (has) { $("image-preview").src = p.image_url; $("image-preview").alt = "Image of " + p.name; }
  $("image-none").hidden = has;
  $("image-remove").hidden = !has;
}

// uploadImage sends the chosen file as the body, checked here first for
// what the API refuses (type, size) so the admin is told at once.
async function uploadImage() {
  const card = $("image-card"), file = $("image-file").files[0];
  clearErrors(card);
  if (!file) return fieldError(card, "image", "Choose an image file first.");
  if (!imageTypes.includes(file.type)) return fieldError(card, "image", "The image must be a PNG, JPEG or WebP file.");
  if (file.size > maxImageBytes) return fieldError(card, "image", "The image is larger than 2 MiB.");
  try {
    const r = await api("PUT", "/admin/products/" + enc(editing) + "/image", file);
    showImage({ image_url: r.image_url, name: $("product-name").value });
    $("image-file").value = "";
    say("The image of " + editing + " is saved.");
  } catch (err) { showErrors(card, err); }
}

async function removeImage() {
  if (!await ask("Remove the image of " + editing + "? The storefront shows the product without one.", "Remove the image")) return;
  try {
    await api("DELETE", "/admin/products/" + enc(editing) + "/image");
    showImage({ image_url: null });
    say("The image of " + editing + " is removed.");
  } catch (err) { fail(err); }
}

function bindCatalog() {
  $("products-more").addEventListener("click", moreProducts);
  $("product-form").addEventListener("submit", saveProduct);
  $("image-upload").addEventListener("click", uploadImage);
  $("image-remove").addEventListener("click", removeImage);
}
