// How `bootstrap.inspector.min.css` is made from Bootstrap 4.6.0's `bootstrap.min.css`
// (`make inspector-css`): only the rules whose classes the inspector's templates, its Python
// (charts, template tags) and Evennia's `website/messages.html` can produce are kept, so a page
// at 5,000 entries stays under 300 KB with its CSS.
module.exports = {
  content: [
    "ai_assistant/web/templates/**/*.html",
    "ai_assistant/web/**/*.py",
  ],
  css: ["build/npm/node_modules/bootstrap/dist/css/bootstrap.min.css"],
  // Evennia's messages template builds `alert-{{ message.tags }}`; keep every alert variant.
  safelist: { standard: [/^alert/, /^close$/] },
};
